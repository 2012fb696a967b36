"""`catchup-assets console`: a web console over a storage root, the records `status` reads (issue 46)."""
