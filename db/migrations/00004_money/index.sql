-- Reserved for the money issue's schema; replaced when that work lands.
select 1;
