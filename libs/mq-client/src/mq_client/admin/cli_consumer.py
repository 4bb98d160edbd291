"""``mqadmin`` consumer-side verbs (filled in below)."""
