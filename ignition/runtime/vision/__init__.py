"""A request's images: the prepared inputs it carries and their encoding into the rows its
prompt's placeholders take."""
