-- Reserved for the directory-search-docs-votes issue's schema; replaced when that work lands.
select 1;
