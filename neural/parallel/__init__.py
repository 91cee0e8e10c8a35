"""Training on several processes (--parallel data|vocab, --nproc-per-node): nothing else imports this package."""
