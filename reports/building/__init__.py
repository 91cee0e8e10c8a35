"""Building a report from results.json alone: tables, claims and their statistics, figures, the cross-corpus summary and the pages (docs/architecture.md)."""
