-- Reserved for the cookbooks issue's schema; replaced when that work lands.
select 1;
