"""Answer-quality studies of sqa (which facts to show, what the answer head gains, retrieval
Recall@10, the steps reader's decision), apart from the product: each module runs as
``python -m experiments.NAME`` from the repository root, uses only sqa's public API, and writes to
``experiments/work/`` (git-ignored) unless ``--out`` names a file. experiments/README.md lists
every study: its question, command, recorded result and conclusion. ``python -m experiments.results``
writes docs/results.md and the README's results table from the recorded results.
"""
