-- Reserved for the identity issue's schema; replaced when that work lands.
select 1;
