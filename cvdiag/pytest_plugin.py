"""pytest plugin (issue 5): placeholder until it lands, so the entry point loads."""
