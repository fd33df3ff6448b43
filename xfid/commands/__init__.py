"""One module per subcommand that is heavier than ingest/export (imported lazily by cli.py)."""
