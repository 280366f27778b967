"""The default facts reader and its trained answer head.

- ``sources``: the two fact sources (Wikipedia sentences of the top-k paragraphs, StrategyQA's
  annotated facts of other train questions) and their ranking.
- ``prompt``: the fixed prompt prefixes, the demonstrations and the per-question read-outs
  (``read_question`` -> ``QuestionFeatures``).
- ``features``: fact selection and the resumable features files.
- ``head``: the answer head (feature specs, logistic regression, provenance).
- ``training``: cross-validated choice of the feature set and the heads' fit.
- ``reader``: ``FactsReader``, the batch reader ``sqa eval`` and ``sqa ask`` use.
"""
