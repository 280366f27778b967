"""sqa's public Python API, re-exported by ``sqa`` itself (``sqa.Index``, ``sqa.Reader``,
``sqa.evaluate``, ...): a composition layer over the stages, like ``sqa.pipeline`` (which it uses
for every piece of wiring) and the CLI (which calls it).

- :mod:`sqa.api.out_of_fold`: the out-of-fold run of the facts reader (``run_out_of_fold``).
- :mod:`sqa.api.features`: seeding the features store (``import_features``).
- :mod:`sqa.api.ask`: one question as ``sqa ask`` shows it (``ask_question`` -> ``Asked``).
- :mod:`sqa.api.matrix`: several presets on the same questions (``sqa eval --preset A,B``).

Their results are drawn (terminal or notebook) by :mod:`sqa.render`.
"""
