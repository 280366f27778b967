"""Performance benchmarks of sqa: indexing, search, ``sqa ask`` / ``sqa eval`` speed, the
Elasticsearch bulk path and the transformers reader on a GPU. Each module runs as
``python -m bench.NAME`` from the repository root and writes its results to ``bench/work/``
(git-ignored) unless ``--out`` names a file; the recorded results are ``bench/results/*.json``,
written with an explicit ``--out``. Answer-quality studies live in ``experiments/``.
"""
