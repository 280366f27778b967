"""The steps reader (``reader.StepsReader``): decompose (``decomposer``, ``prompts``), retrieve per
step, answer each step (``operations`` computes the arithmetic and comparison steps), combine.

Nothing here opens an index: ``sqa.pipeline`` wires backend, retriever and reader.
"""
