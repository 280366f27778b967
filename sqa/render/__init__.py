"""Rich views of sqa's results, for a terminal (the ``sqa`` command draws with them) or a notebook
(rich renders there too): ``Console().print(view)``.

- :mod:`sqa.render.answers`: the tree of an asked question (``sqa ask``).
- :mod:`sqa.render.tables`: metrics, search hits, comparisons, answer heads, Recall@10 tables.
- :mod:`sqa.render.progress`: progress drawers (rate and ETA) for ``sqa.evaluate``, ``Index.build``
  and the retrieval evaluation, passed to them as their ``progress`` callbacks.
"""
