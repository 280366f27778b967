"""``sqa index`` never destroys and never crashes, tried as a new user would (the real process,
README install, real StrategyQA / distractor data): ``--fresh`` on a directory that is not an
index, wrong field types, damaged or unreadable corpus files, a full disk, a second build, Ctrl-C
at any moment, duplicate evidence IDs, kill -9 between a commit and its checkpoint followed by a
resume with another ``--commit-every``, an empty corpus."""

from __future__ import annotations

import fcntl
import gzip
import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import default_sigint, one_error_line, run_sqa, sqa_argv
from sqa.cli import main
from sqa.indexing import open_backend, read_manifest
from sqa.indexing.build import CHECKPOINT, LOCK
from sqa.indexing.embedded import TantivyBackend
from sqa.indexing.corpus import read_corpus
from sqa.strategyqa import DISTRACTORS_FILE, PARAGRAPHS_FILE

N_GOLD = 9_251


def real_lines(n: int, start: int = 0) -> list[str]:
    with gzip.open(DISTRACTORS_FILE, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, start, start + n)]


def distinct_ids(*files) -> set[str]:
    return {p.evidence_id for f in files for p in read_corpus(f)}


# --- --fresh ------------------------------------------------------------------------------------


def test_fresh_refuses_a_directory_that_is_not_an_index_and_deletes_nothing(tmp_path):
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "thesis.tex").write_text("years of work", encoding="utf-8")
    (home / "notes" / "a.txt").write_text("a", encoding="utf-8")
    before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    for args, cwd, env in [
        (["--index-dir", str(home)], None, {}),
        (["--index-dir", "."], home, {}),  # the slip `--index-dir .`
        (["--index-dir", "~"], None, {"HOME": str(home)}),  # the slip `--index-dir ~`
    ]:
        line = one_error_line(run_sqa(["index", "--corpus", "strategyqa", "--fresh", *args], env=env, cwd=cwd))
        assert "not an sqa index" in line and "nothing was deleted" in line and "thesis.tex" in line
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == before
    assert (home / "thesis.tex").read_text(encoding="utf-8") == "years of work"
    # a file given as the index directory: refused, untouched
    line = one_error_line(
        run_sqa(["index", "--corpus", "strategyqa", "--fresh", "--index-dir", str(home / "thesis.tex")])
    )
    assert "is a file" in line and (home / "thesis.tex").read_text(encoding="utf-8") == "years of work"


def test_fresh_rebuilds_an_index_and_keeps_files_it_did_not_create(tmp_path):
    d = tmp_path / "idx"
    assert run_sqa(["index", "--corpus", "strategyqa", "--fresh", "--index-dir", tmp_path / "new"]).returncode == 0
    small = tmp_path / "small.jsonl"
    small.write_text("\n".join(real_lines(30)) + "\n", encoding="utf-8")
    assert run_sqa(["index", "--corpus", small, "--index-dir", d]).returncode == 0
    (d / "my-notes.txt").write_text("keep me", encoding="utf-8")
    r = run_sqa(["index", "--corpus", "strategyqa", "--fresh", "--index-dir", d])
    assert r.returncode == 0, r.stderr
    assert "kept 1 other entries (e.g. my-notes.txt)" in r.stderr
    assert (d / "my-notes.txt").read_text(encoding="utf-8") == "keep me"
    m = read_manifest(d)
    assert m["paragraph_count"] == N_GOLD and m["corpus_files"] == [str(PARAGRAPHS_FILE.resolve())]
    be = open_backend(d)
    try:
        assert be.count() == N_GOLD and be.get([json.loads(real_lines(1)[0])["title"] + "-1"]) == []
    finally:
        be.close()


# --- malformed input ------------------------------------------------------------------------------


def test_wrong_field_types_are_skipped_and_counted_and_the_build_completes(tmp_path):
    good = real_lines(40, start=3000)
    rows = [json.loads(g) for g in good]
    bad = [
        {"headers": 5},
        {"section": 7},
        {"section": ["a list"]},
        {"headers": "abc"},
        {"para_id": {"a": 1}},
        {"para_id": 2.5},
        {"para_id": False},
    ]
    lines = (
        list(good[:20]) + [json.dumps({**rows[i], **b, "title": f"Nested {i}"}) for i, b in enumerate(bad)] + good[20:]
    )
    corpus = tmp_path / "types.jsonl"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    d = tmp_path / "idx"
    r = run_sqa(["index", "--corpus", corpus, "--index-dir", d])
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert "paragraphs read 40, indexed 40, skipped (malformed) 7, in index 40" in r.stdout
    for n in range(21, 28):
        assert f"{corpus}:{n}: wrong field type" in r.stderr
    m = read_manifest(d)
    assert m["paragraphs_skipped"] == 7 and m["paragraph_count"] == 40
    be = open_backend(d)
    try:
        assert be.count() == 40
        assert not [h for h in be.search("Nested", k=50) if h.paragraph.title.startswith("Nested")]
        first = be.get([f"{rows[0]['title']}-{rows[0]['para_id']}"])[0]
        assert first.headers == tuple(h for h in rows[0]["headers"] if h) and first.section == rows[0]["section"]
    finally:
        be.close()


@pytest.mark.parametrize("damage", ["truncated", "trailing garbage"])
def test_a_damaged_small_gzip_is_one_line(tmp_path, damage):
    data = gzip.compress(("\n".join(real_lines(50)) + "\n").encode())
    data = data[: len(data) // 2] if damage == "truncated" else data + b"garbage!!"
    corpus = tmp_path / "damaged.jsonl.gz"
    corpus.write_bytes(data)
    line = one_error_line(run_sqa(["index", "--corpus", corpus, "--index-dir", tmp_path / "idx"]))
    assert f"{corpus}: compressed stream is truncated or corrupt" in line and "re-download" in line


def _without_root_file_powers() -> None:
    """``preexec_fn``: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set, so the
    command (even as root) gets EACCES on a chmod 000 file like any user."""
    import ctypes

    default_sigint()
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH; 24 = PR_CAPBSET_DROP
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def test_an_unreadable_corpus_file_is_one_line(tmp_path):
    """chmod 000. Root reads everything, so as root the command runs without the capabilities
    that let root read any file (or, where that is refused, in a new user namespace: ``unshare -U``)."""
    corpus = tmp_path / "secret.jsonl"
    corpus.write_text("\n".join(real_lines(5)) + "\n", encoding="utf-8")
    os.chmod(corpus, 0)
    argv = sqa_argv() + ["index", "--corpus", str(corpus), "--index-dir", str(tmp_path / "idx")]
    try:
        r = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=_without_root_file_powers if os.geteuid() == 0 else default_sigint,
        )
    except subprocess.SubprocessError:  # the capability could not be dropped
        exe = shutil.which("unshare")
        if not exe or subprocess.run([exe, "-U", "true"], capture_output=True).returncode != 0:
            pytest.skip("running as root, who reads a chmod 000 file, and neither prctl nor `unshare -U` can stop that")
        r = subprocess.run([exe, "-U"] + argv, capture_output=True, text=True, timeout=120, preexec_fn=default_sigint)
    line = one_error_line(r)
    assert str(corpus) in line and ("permission denied" in line or "is not readable" in line)


def test_a_corpus_that_is_a_directory_or_empty_is_one_line(tmp_path):
    line = one_error_line(run_sqa(["index", "--corpus", tmp_path, "--index-dir", tmp_path / "idx"]))
    assert f"{tmp_path}: is a directory" in line
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    line = one_error_line(run_sqa(["index", "--corpus", empty, "--index-dir", tmp_path / "idx2"]))
    assert str(empty) in line and "no paragraph indexed" in line
    assert read_manifest(tmp_path / "idx2") is None and not (tmp_path / "idx2" / CHECKPOINT).exists()
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"a": 1}\n{"title": "T"}\n', encoding="utf-8")
    r = run_sqa(["index", "--corpus", junk, "--index-dir", tmp_path / "idx3"])
    assert r.returncode == 2 and r.stderr.splitlines()[-1].startswith("error: ")
    assert "all 2 non-blank lines were malformed" in r.stderr.splitlines()[-1]


# --- the disk, the lock, Ctrl-C -------------------------------------------------------------------


def _small_tmpfs_argv() -> list[str] | None:
    """``unshare`` a user + mount namespace with a 2 MiB tmpfs, if this machine allows it."""
    exe = shutil.which("unshare")
    if not exe:
        return None
    probe = subprocess.run(
        [exe, "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, timeout=30
    )
    return [exe, "-rm"] if probe.returncode == 0 else None


def test_a_full_disk_during_indexing_is_one_line_naming_the_index(tmp_path):
    """A real full file system (a 2 MiB tmpfs in a private mount namespace) where the machine
    allows it; else a file-size limit (EFBIG), the same failure path in tantivy."""
    unshare = _small_tmpfs_argv()
    if unshare:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        d = mnt / "idx"
        script = f"mount -t tmpfs -o size=2m tmpfs {shlex.quote(str(mnt))} && exec " + " ".join(
            shlex.quote(a) for a in sqa_argv() + ["index", "--corpus", "strategyqa", "--index-dir", str(d)]
        )
        r = subprocess.run(
            unshare + ["sh", "-c", script], capture_output=True, text=True, timeout=300, preexec_fn=default_sigint
        )
        want = "no space left on the device"
    else:
        import resource

        d = tmp_path / "idx"

        def limit():
            default_sigint()
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

        r = subprocess.run(
            sqa_argv() + ["index", "--corpus", "strategyqa", "--index-dir", str(d)],
            capture_output=True,
            text=True,
            timeout=300,
            preexec_fn=limit,
        )
        want = "file-size limit"
    line = one_error_line(r)
    assert str(d) in line and want in line and "run the same command again" in line


def test_a_second_concurrent_build_is_one_line(tmp_path):
    d = tmp_path / "idx"
    d.mkdir()
    # 1) another `sqa index` holds the build lock
    with open(d / LOCK, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        line = one_error_line(run_sqa(["index", "--corpus", "strategyqa", "--index-dir", d]))
    assert str(d) in line and "another `sqa index` is building this index" in line
    # 2) some other program holds tantivy's writer lock (the LockBusy of the issue)
    be = TantivyBackend(d)
    be._get_writer()
    try:
        line = one_error_line(run_sqa(["index", "--corpus", "strategyqa", "--index-dir", d]))
    finally:
        be.close()
    assert str(d) in line and "another process is writing this index" in line
    # 3) --fresh while another program writes: refused before anything is deleted
    assert run_sqa(["index", "--corpus", "strategyqa", "--index-dir", d]).returncode == 0
    files = sorted(p.name for p in d.iterdir())
    be = TantivyBackend(d)
    be._get_writer()
    try:
        line = one_error_line(run_sqa(["index", "--corpus", "strategyqa", "--fresh", "--index-dir", d]))
    finally:
        be.close()
    assert "another process is writing this index" in line and "deleted nothing" in line
    assert sorted(p.name for p in d.iterdir()) == files and read_manifest(d)["paragraph_count"] == N_GOLD
    r = run_sqa(["index", "--corpus", "strategyqa", "--fresh", "--index-dir", d])  # free again: builds
    assert r.returncode == 0 and f"in index {N_GOLD:,}" in r.stdout


class _ConsumedAfterMerge:
    """A tantivy IndexWriter whose ``wait_merging_threads`` (which consumes the writer) is followed
    by Ctrl-C: the moment that made ``sqa index`` exit 1 with "IndexWriter was consumed"."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def wait_merging_threads(self):
        self._inner.wait_merging_threads()
        raise KeyboardInterrupt


def test_ctrl_c_right_after_a_commit_exits_130_not_1(tmp_path, monkeypatch, capsys):
    real_writer = TantivyBackend._get_writer

    def writer(self):
        w = real_writer(self)
        if not isinstance(w, _ConsumedAfterMerge):
            w = self._writer = _ConsumedAfterMerge(w)
        return w

    monkeypatch.setattr(TantivyBackend, "_get_writer", writer)
    assert main(["index", "--corpus", "strategyqa", "--index-dir", str(tmp_path / "idx")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("interrupted:") and not any("consumed" in e for e in err)


def test_ctrl_c_at_any_moment_of_sqa_index_exits_130_and_resumes_exactly(tmp_path):
    """Real SIGINTs at several moments of a build with a checkpoint every 1,000 paragraphs (a commit
    is under way much of the time): every interrupted run exits 130 with one line, and the last
    run completes with exactly the distinct paragraphs."""
    dist = tmp_path / "d.jsonl.gz"
    with gzip.open(dist, "wt", encoding="utf-8") as f:
        f.write("\n".join(real_lines(20_000)) + "\n")
    d = tmp_path / "idx"
    argv = sqa_argv() + [
        "index",
        "--corpus",
        str(PARAGRAPHS_FILE),
        "--corpus",
        str(dist),
        "--index-dir",
        str(d),
        "--commit-every",
        "1000",
    ]
    codes = []
    # the first SIGINT as soon as this run's first checkpoint is seen, with a dozen commits still to
    # come: a quiet machine builds the rest in about a second (a CI run once finished it inside 0.3 s)
    for delay in (0.0, 0.3, 0.6, 0.9, 1.2, 1.5):
        # wait for a checkpoint written by *this* run (the previous run's file is already there):
        # a SIGINT while the interpreter is still starting kills it silently (-2) before sqa runs
        ckpt = d / CHECKPOINT
        before = ckpt.stat().st_mtime_ns if ckpt.exists() else None
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < 60:
            try:
                if ckpt.stat().st_mtime_ns != before:
                    break
            except FileNotFoundError:  # not written yet, or removed by a finished build
                pass
            time.sleep(0.01)
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        codes.append(p.returncode)
        if p.returncode == 0:
            break
        if p.returncode == -signal.SIGINT and not ckpt.exists() and "interrupted" not in err:
            # the build had finished (a finished build removes its checkpoint) and the SIGINT came
            # while the interpreter was exiting, after Python gives SIGINT back to the default
            # action: nothing was left to interrupt (seen on a loaded machine, where exit is slow)
            break
        assert p.returncode == 130, err[-3000:]
        assert err.strip().splitlines()[-1].startswith("interrupted:") and "Traceback" not in err
    assert 130 in codes
    r = subprocess.run(argv, capture_output=True, text=True, preexec_fn=default_sigint, timeout=300)
    assert r.returncode == 0, r.stderr
    n = N_GOLD + 20_000
    assert read_manifest(d)["paragraph_count"] == n and read_manifest(d)["duplicates_replaced"] == 0


# --- duplicates ------------------------------------------------------------------------------------

_KILL_AFTER_COMMIT = """
import os, signal, sys
from sqa.indexing import build_index
from sqa.indexing.embedded import TantivyBackend

class KillAfterCommit(TantivyBackend):
    commits = 0

    def commit(self):
        super().commit()
        KillAfterCommit.commits += 1
        if KillAfterCommit.commits == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)  # kill -9: the window is committed, its checkpoint not written

d, files = sys.argv[1], sys.argv[4:]
build_index(files, d, KillAfterCommit(d), commit_every=int(sys.argv[3]), batch_size=500)
"""


@pytest.mark.parametrize("first, then", [(4_000, 1_000), (1_000, 7_000)])
def test_kill_9_between_commit_and_checkpoint_then_resume_with_another_commit_every(tmp_path, first, then):
    dist = tmp_path / "d.jsonl.gz"
    with gzip.open(dist, "wt", encoding="utf-8") as f:
        f.write("\n".join(real_lines(15_000, start=40_000)) + "\n")
    d = tmp_path / "idx"
    files = [str(dist), str(PARAGRAPHS_FILE)]  # the kill lands inside the first file
    p = subprocess.run(
        [sys.executable, "-c", _KILL_AFTER_COMMIT, str(d), "3", str(first), *files],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == -signal.SIGKILL, p.stderr
    ckpt = json.loads((d / CHECKPOINT).read_text())
    assert ckpt["indexed"] == 2 * first  # the 3rd window is committed but not checkpointed
    be = TantivyBackend(d, create=False)
    assert be.count() == 3 * first
    be.close()
    r = run_sqa(["index", "--corpus", files[0], "--corpus", files[1], "--index-dir", d, "--commit-every", str(then)])
    assert r.returncode == 0, r.stderr
    n = N_GOLD + 15_000
    assert len(distinct_ids(*files)) == n
    assert "(resumed)" in r.stdout and f"paragraphs read {n:,}" in r.stdout and f"in index {n:,}" in r.stdout
    assert "warning" not in r.stderr
    m = read_manifest(d)
    assert m["paragraph_count"] == n and m["duplicates_replaced"] == 0
    be = open_backend(d)
    try:
        assert be.count() == n
        assert [h.evidence_id for h in be.search("maximum depth of the Black Sea", k=10)].count("Black Sea-2") == 1
    finally:
        be.close()


def test_an_evidence_id_twice_in_the_input_is_indexed_once_counted_and_reported(tmp_path):
    lines = real_lines(3_000, start=7_000)
    rows = [json.loads(x) for x in lines]
    # 3 repeats: one in the same commit window, two in later windows (--commit-every 1000)
    dup_rows = [
        {**rows[10], "para": "REPLACEMENT ONE"},
        {**rows[20], "para": "REPLACEMENT TWO"},
        {**rows[2_500], "para": "REPLACEMENT THREE"},
    ]
    out = (
        lines[:500]
        + [json.dumps(dup_rows[0])]
        + lines[500:2_600]
        + [json.dumps(dup_rows[2])]
        + lines[2_600:]
        + [json.dumps(dup_rows[1])]
    )
    corpus = tmp_path / "dups.jsonl"
    corpus.write_text("\n".join(out) + "\n", encoding="utf-8")
    d = tmp_path / "idx"
    r = run_sqa(["index", "--corpus", corpus, "--index-dir", d, "--commit-every", "1000"])
    assert r.returncode == 0, r.stderr
    assert (
        "paragraphs read 3,003, indexed 3,003, skipped (malformed) 0, in index 3,000, duplicates replaced 3" in r.stdout
    )
    warning = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    assert len(warning) == 1 and "3 paragraphs had an evidence ID seen before" in warning[0]
    m = read_manifest(d)
    assert m["paragraph_count"] == 3_000 and m["duplicates_replaced"] == 3 and m["paragraphs_read"] == 3_003
    be = open_backend(d)
    try:
        assert be.count() == 3_000
        for row in dup_rows:  # the later copy won, as in Elasticsearch
            eid = f"{row['title']}-{row['para_id']}"
            assert [p.text for p in be.get([eid])] == [row["para"]]
            hits = [h.evidence_id for h in be.search(row["para"] + " " + row["title"], k=20)]
            assert hits.count(eid) == 1
    finally:
        be.close()


def test_fresh_keeps_a_file_that_only_looks_like_a_tantivy_segment(tmp_path):
    # issue 34 item 2: any name matching tantivy's segment pattern was deleted, recorded or not
    small = tmp_path / "c.jsonl"
    small.write_text("\n".join(real_lines(30)) + "\n", encoding="utf-8")
    d = tmp_path / "d"
    assert run_sqa(["index", "--corpus", small, "--index-dir", d]).returncode == 0
    mine = [d / "0123456789abcdef0123456789abcdef.store", d / "0123456789abcdef0123456789abcdef.7.del"]
    for f in mine:
        f.write_text("mine\n", encoding="utf-8")
    r = run_sqa(["index", "--fresh", "--corpus", small, "--index-dir", d])
    assert r.returncode == 0, r.stderr
    assert all(f.read_text(encoding="utf-8") == "mine\n" for f in mine)
    assert "kept 2 other entries" in r.stderr
    assert read_manifest(d)["paragraph_count"] == 30


def test_a_damaged_index_store_is_one_line_naming_the_index(tmp_path):
    # issue 34 (low): a corrupted store gave "ValueError: An IO error occurred ..." with no path
    small = tmp_path / "c.jsonl"
    small.write_text("\n".join(real_lines(30)) + "\n", encoding="utf-8")
    d = tmp_path / "d"
    assert run_sqa(["index", "--corpus", small, "--index-dir", d]).returncode == 0
    for f in d.glob("*.store"):
        b = bytearray(f.read_bytes())
        b[10:200] = bytes(190)
        f.write_bytes(bytes(b))
    line = one_error_line(run_sqa(["search", "church history", "--index-dir", d]))
    assert f"{d}: cannot search the index" in line and f"sqa index --fresh --index-dir {d}" in line
