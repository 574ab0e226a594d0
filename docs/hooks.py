"""MkDocs hooks: checks that fail the strict build."""
