"""What ``sqa --help`` shows: the commands in the workflow's order, flags without a type."""

from __future__ import annotations

from sqa.eval.protocols import PROTOCOLS

# the texts of `sqa eval`'s own options: --help shows each one's first sentence, docs/cli.md all of it
EVAL_HELP = {
    "split": "dev (default), train, train-2061, all or test. Sizes: train 2,290, dev 229, all = train + test, test 490 (predictions only). With the facts reader, train / train-2061 / all are answered out-of-fold (5 term-grouped folds) and the run also writes the model's answer heads to $SQA_HOME/heads.",
    "protocol": "A named question set instead of --split. One of "
    + " | ".join(PROTOCOLS)
    + " (the release's order; train ones answered out-of-fold by the facts reader; see docs/protocols.md). "
    "Recorded in run.json.",
    "limit": "Only the first N questions of the split.",
    "out": "Run folder; the same folder resumes the run. Default: runs/eval/SPLIT-TAG-MODEL under the working directory, SPLIT the split, protocol or dataset file's stem, TAG the preset or method and how it answers (facts, facts-oof, predicted-noretrieval, cot, ...), MODEL the model's name.",
    "decomposition": "predicted, gold or question (one step). predicted: the decomposer's steps; gold: the annotated steps; question: the whole question as one step. Default: question for --reader facts, predicted for --reader steps.",
    "reader": "facts (default: a few selected facts, trained answer head) | steps (preset steps).",
    "oracle": "Diagnostic upper bound, never a default: facts (the question's annotated facts) | paragraphs (its annotated evidence paragraphs). Refused on test.",
    "head": "Answer head file (default: the model's own). The model's own is the one `sqa eval --split train --model M` wrote for --model, else the shipped one. Not with train / train-2061 / all, which are answered out-of-fold.",
    "dataset": "A question file instead of --split. Any file in StrategyQA's format (.json list, .jsonl, or a local `datasets` directory); Recall@10/SARI only where annotated.",
    "features_cache": "Facts-reader records not to read again. A features file (JSON lines of the facts reader's records) made with the same model and settings: questions in it are not read again.",
    "model": "A name, .gguf file, openai:NAME or HF checkpoint. Default: qwen2.5-coder-1.5b; openai:NAME is a served model (see --base-url); a Hugging Face checkpoint loads with transformers.",
    "k": "Paragraphs retrieved per step (top-k). Default 10, a --method's own default otherwise.",
    "batch_size": "Questions per reader call (default 32). On a GPU they run in lockstep; each answered question is fsync'd to traces.jsonl at once.",
    "folds": "Cross-fitting folds on train splits (default 5). The folds of the few-shot examples on train / train-2061 / all.",
    "retrieval": "--no-retrieval: the same model and prompts without evidence (preset no-retrieval).",
    "strict": "Stop at the first bad --dataset entry. By default it is skipped and counted.",
    "replace_heads": "Remove your other heads of this model. With --split train / train-2061 / all, so that the new one answers (by default it is written beside them and the head fitted on the most questions answers).",
    "predictions": "Leaderboard predictions JSON {qid: {answer, decomposition, paragraphs}}.",
    "score_split": "Gold split to score against (default: the smallest of dev, train-2061, train holding every predicted qid).",
    "answering": "auto (default), head or out-of-fold. auto: train splits and questions a head was fitted on out-of-fold, others by the held-out head, zero-shot without one; head or out-of-fold requires that; recorded in run.json.",
}

ORDER = ("index", "search", "ask", "eval", "compare", "heads", "features")  # the workflow's order


def tidy_help(cmd):
    """``cmd`` (a click group, as typer builds it), its commands in ``ORDER`` (others after) and
    no type shown for a flag at any level (typer writes ``<bool>``), --help itself included;
    returns ``cmd``."""
    if hasattr(cmd, "commands"):
        cmd.commands = dict(sorted(cmd.commands.items(), key=lambda kv: ORDER.index(kv[0]) if kv[0] in ORDER else 99))
    _no_flag_type(cmd)
    return cmd


def _no_flag_type(cmd) -> None:
    params = [*cmd.params, cmd.get_help_option(cmd.context_class(cmd))] if cmd.add_help_option else cmd.params
    for p in params:
        if p is not None and getattr(p, "is_flag", False) and p.metavar is None:
            p.metavar = ""
    for sub in getattr(cmd, "commands", {}).values():
        _no_flag_type(sub)
