"""What people see: the ``cvdiag`` command, its tables, CI output and the HTML report."""
