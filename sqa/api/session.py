"""Many questions through one loaded reader: ``sqa ask -`` (questions one a line from a stream)
and ``sqa ask -i`` (an interactive prompt). The model and the index load once, at the first
question (or before the prompt opens), and every question is answered by
:func:`sqa.api.ask.ask_question`, so each answer is what ``sqa ask "QUESTION"`` would print.

>>> session = AskSession(sqa.Reader("facts"))
>>> for asked in session.answer_lines(open("questions.txt")):
...     print(asked.result.answer, asked.result.p_yes)
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Callable, Iterable, Iterator

from sqa.types import SqaError

MODES = ("one", "lines", "prompt")  # a question given, questions from stdin (`-`), an interactive prompt (-i)


def session_mode(question: str | None, interactive: bool, stdin_is_tty: bool) -> str:
    """How ``sqa ask`` reads its questions -> one of :data:`MODES`: "one" for a question given,
    "lines" for ``-`` (one question a line from stdin), "prompt" for ``-i`` or no question with a
    terminal on stdin. Raises SqaError (one line) for ``-i`` with a question, or no question and
    no terminal (as click's own "missing argument" line)."""
    if interactive:
        if question is not None:
            raise SqaError("-i opens a prompt for questions; give no question with it (or drop -i)")
        return "prompt"
    if question == "-":
        return "lines"
    if question is not None:
        return "one"
    if stdin_is_tty:
        return "prompt"
    raise SqaError(
        "sqa ask: Missing argument 'QUESTION': pass a question, `-` to read them one a line from stdin, "
        "or -i for a prompt (see `sqa ask --help`)"
    )


class AskSession:
    """One :class:`sqa.Reader` asked question after question (:meth:`ask`), loaded once: the
    answer head is checked and the model and index load at the first question or at :meth:`load`.
    ``decomposition``, ``steps``, ``status`` and ``note`` are :func:`sqa.api.ask.ask_question`'s.
    ``asked`` counts the questions answered."""

    def __init__(
        self,
        reader,
        *,
        decomposition: str | None = None,
        steps: bool = False,
        status: Callable[[str], Any] | None = None,
        note: Callable[[str], None] = lambda line: None,
    ):
        self.reader, self.decomposition, self.steps = reader, decomposition, steps
        self.status = status or (lambda message: nullcontext())
        self.note = note
        self.asked = 0

    def load(self) -> None:
        """Check the head and load the model and the index now (what the first :meth:`ask` would
        do), with the ``status`` "loading" spinner. Raises what loading raises."""
        if not self.reader.loaded:
            if self.reader.preset.reader == "facts":
                self.reader.preflight()
            with self.status(f"loading {self.reader.model} and the index…"):
                self.reader.pipeline  # noqa: B018  (built on first use)

    @property
    def model(self):
        """The loaded model (``sqa.types.LanguageModel``), None before the first question."""
        return self.reader.pipeline.model if self.reader.loaded else None

    def ask(self, question: str):
        """Answer ``question`` -> ``sqa.api.ask.Asked``, exactly as ``sqa ask "QUESTION"`` does.
        Raises SqaError for an empty question, and what loading raises on the first call."""
        from sqa.api.ask import ask_question
        from sqa.checks import text_arg

        if not question.strip():
            raise SqaError("empty question")
        text_arg("sqa ask", "question", question)  # bytes that are not UTF-8 are named as the question's
        if (
            self.reader.loaded
        ):  # the model's state of a fresh process (llama.cpp: the KV cache of the prompt heads only)
            back = getattr(self.reader.pipeline.model, "back_to_prefixes", None)
            if back is not None:
                back()
        asked = ask_question(
            self.reader,
            question,
            decomposition=self.decomposition,
            steps=self.steps,
            status=self.status,
            note=self.note,
        )
        self.asked += 1
        return asked

    def answer_lines(self, lines: Iterable[str]) -> Iterator:
        """Each non-blank line of ``lines`` (a file or ``sys.stdin``: read as it comes, so a pipe
        is answered question by question) as a question, as typed (without its line ending) -> its
        ``Asked``, in order."""
        for line in lines:
            if line.strip():  # the line as `sqa ask "$line"` would get it: only its line ending dropped
                yield self.ask(line.rstrip("\r\n"))

    def prompt(
        self,
        show: Callable[[Any], None],
        *,
        read: Callable[[str], str] = input,
        say: Callable[[str], None] = print,
        on_error: Callable[[Exception], str | None] = lambda e: None,
        prompt: str = "question> ",
    ) -> int:
        """The interactive loop of ``sqa ask -i``: ``read(prompt)`` a question (Python's
        ``input``, with line editing and history where ``readline`` is imported), answer it and
        ``show`` the ``Asked``, until ``read`` raises EOFError (Ctrl-D); returns the number answered.
        Ctrl-C (KeyboardInterrupt) at the prompt clears the line, and while a question is answered
        cancels that question: ``say`` tells so and the prompt comes back, the model still loaded.
        An error ``on_error(e)`` turns into a line (as ``sqa ask`` would print it) is said and the
        session goes on; one it returns None for is raised. Loads first (:meth:`load`)."""
        self.load()
        while True:
            try:
                question = read(prompt)
            except EOFError:
                say("")  # leave the shell's prompt on a line of its own
                return self.asked
            except KeyboardInterrupt:
                say("")
                continue
            if not question.strip():
                continue
            try:
                show(self.ask(question))
            except KeyboardInterrupt:
                say("cancelled: the question was not answered; the model stays loaded (Ctrl-D leaves)")
            except Exception as e:
                line = on_error(e)
                if line is None:
                    raise
                say(f"error: {line}")
