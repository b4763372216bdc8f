"""What veil itself wrote to the memory files of a project (issue 17, "provenance in prompts").

Memory files are committed with the project, so a clone can bring MEMORY.md files full of text
no agent of this user ever wrote, and anyone can edit them by hand. Only what veil wrote for
this user is the agent's own memory; everything else is *repository-provided* and is labelled
so in the prompt (:mod:`.injection`), in ``memory_read`` / ``memory_search`` results, and is never
copied into memory by extraction (:mod:`.trust`).

Granularity: per entry. Each time veil writes an entry (``memory_write``, ``/remember``,
``veil memory write``, the pre-compaction extractor) it records a *tag* of that entry; an entry
on disk is veil-written when its tag is on record. So a human appending to a file, or a teammate
merging their own entries, leaves this user's entries trusted and only labels the new text; an
entry edited by hand (one character is enough) loses its tag. The header of a file (text before
the first date comment) is trusted only when veil wrote it: ``PUT /memory/{file}`` (an
authenticated call to veil's own API) and ``veil memory trust`` (the user vouching for what is
there after reading it) record the header and every entry of the file.

Tags: ``HMAC-SHA256(key, kind NUL folder NUL date NUL text)`` cut to 128 bits (hex), where
``folder`` is the scope folder relative to ``.veil/memory`` (``.`` or ``agents/<name>``, so an
entry moved to ``archive-YYYY-MM.md`` in the same folder keeps its tag while a copy into another
scope does not), ``date`` the entry's ``YYYY-MM-DD`` and ``text`` its content as
:attr:`~veil_memoryfiles.entries.Entry.content` reads it back. The key is 32 random bytes in the
user's config folder (``$VEIL_HOME/memory-provenance.key``, mode 0600), never in the project.

Why a keyed hash and not a plain one: the record lives in ``.veil/memory-provenance``, which
``.veil/.gitignore`` keeps out of commits, but a hostile repository can commit any file it likes;
with plain SHA-256 it could ship a record "proving" its own entries. Without the user's key it
cannot make a valid tag, and a teammate's record (their key) vouches for nothing here either.

The record is append-only text (a first comment line, then one tag per line), appended under
``.veil/memory-provenance.lock`` *before* the memory file is written: a crash in between leaves a
tag for an entry that is not there (harmless), never an entry veil wrote without its tag. A torn
last line is ignored (the entry then reads as repository-provided: the safe side). When the
record has grown to twice its size after the last pruning (and past 4,096 tags), tags of
entries no longer in any memory file are dropped (the newest 64 always stay: a writer may have
recorded its tag and not yet written its file).

If the key cannot be read or created (a read-only home folder), nothing is trusted: every memory
file is shown as repository-provided, and a warning says why.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import filelock

from veil import (
    append_bytes_nofollow,
    ensure_gitignore,
    read_bytes_nofollow,
    refuse_links,
    remove_interrupted_temps,
    user_config_dir,
    veil_dir_of,
)
from veil import atomic_write_bytes as core_atomic_write
from veil import checked_veil_path as checked
from veil_memoryfiles.entries import MemoryDocument, parse
from veil_memoryfiles.errors import MemoryBusy

log = logging.getLogger(__name__)

KEY_FILE = "memory-provenance.key"
RECORD_FILE = "memory-provenance"
RECORD_HEADER = (
    b"# veil: tags of the memory entries veil wrote (HMAC-SHA256 with the user's key); "
    b"local state, never commit\n"
)
TAG_HEX = 32  # 128 bits of HMAC-SHA256: forging one is as hard as guessing the key
PRUNE_MIN_TAGS = 4096
PRUNE_KEEP_NEWEST = 64
LOCK_TIMEOUT_S = 30.0
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""A record larger than this is not read (nothing is trusted): a repository could ship a huge
file to slow every session start. Pruning keeps a real record near 33 bytes per live entry."""

_TAG_LINE = re.compile(rb"^[0-9a-f]{%d}$" % TAG_HEX)
_KEY_LINE = re.compile(r"^[0-9a-f]{64}$")

_state_lock = threading.Lock()
_keys: dict[str, tuple[int, bytes | None]] = {}  # key path -> (mtime_ns, key or None)
_records: dict[str, _Record] = {}  # record path -> what was read of it
_warned: set[str] = set()


@dataclass
class _Record:
    ino: int
    size: int  # bytes consumed (whole lines only)
    tags: set[str]
    order: list[str]  # tags in record order (pruning keeps the newest)
    pruned_at: int  # number of tags right after the last pruning (or at first read)


@dataclass(frozen=True)
class FileTrust:
    """Which parts of one memory file veil wrote.

    Attributes:
        header: the header (text before the first date comment) is veil-written; True when the
            file has no header.
        entries: per entry, in file order, whether veil wrote it.
    """

    header: bool
    entries: tuple[bool, ...]

    @property
    def all_trusted(self) -> bool:
        """Everything in the file is veil-written."""
        return self.header and all(self.entries)


def _warn_once(what: str, message: str) -> None:
    if what not in _warned:
        _warned.add(what)
        log.warning("%s", message)


def key_path() -> Path:
    """``$VEIL_HOME/memory-provenance.key`` (or ``~/.veil/...``): the user's tagging key."""
    return user_config_dir() / KEY_FILE


def load_key(create: bool) -> bytes | None:
    """The user's 32-byte tagging key, created (mode 0600) when missing and ``create`` is true.

    Two processes creating it at once agree on one key: the new key is written to a temporary
    file and hard-linked to the final name, which fails if the name exists.

    Returns:
        The key, or None when it does not exist (and ``create`` is false) or cannot be read or
        created (logged once).
    """
    path = key_path()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        _warn_once(str(path), f"memory provenance off: cannot read {path}: {exc}")
        return None
    if st is not None:
        cached = _keys.get(str(path))
        if cached and cached[0] == st.st_mtime_ns:
            return cached[1]
        try:
            text = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError) as exc:
            _warn_once(str(path), f"memory provenance off: cannot read {path}: {exc}")
            return None
        key = bytes.fromhex(text) if _KEY_LINE.match(text) else None
        if key is None:
            _warn_once(
                str(path),
                f"memory provenance off: {path} is not 64 hex digits; delete it to make a new "
                "key (memory written so far will then read as repository-provided)",
            )
        _keys[str(path)] = (st.st_mtime_ns, key)
        return key
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{KEY_FILE}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secrets.token_hex(32) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            os.unlink(tmp)
    except OSError as exc:
        _warn_once(
            str(path),
            f"memory provenance off: cannot create {path}: {exc}; every memory file will read "
            "as repository-provided",
        )
        return None
    return load_key(create=False)


class Provenance:
    """The record of what veil wrote to one project's memory files (see the module docstring).

    Args:
        project_dir: the project root (``.veil/`` lives there).
    """

    def __init__(self, project_dir: Path) -> None:
        self.project_dir = Path(project_dir)
        self.veil_dir = veil_dir_of(self.project_dir)
        self.memory_root = self.veil_dir / "memory"
        self.record_path = self.veil_dir / RECORD_FILE

    # -- tags ----------------------------------------------------------------------------------

    def folder(self, path: Path) -> str:
        """The scope folder of a memory file, relative to ``.veil/memory`` (``.`` or
        ``agents/<name>``), as used in tags."""
        rel = os.path.relpath(os.path.abspath(Path(path).parent), os.path.abspath(self.memory_root))
        return Path(rel).as_posix()

    @staticmethod
    def _tag(key: bytes, *parts: str) -> str:
        msg = "\x00".join(parts).encode("utf-8", "surrogatepass")
        return hmac.new(key, msg, hashlib.sha256).hexdigest()[:TAG_HEX]

    def entry_tag(self, key: bytes, folder: str, date: str, content: str) -> str:
        """Tag of an entry: its scope folder, date (``YYYY-MM-DD``) and content (trimmed,
        ``\\n`` line endings, escapes undone)."""
        return self._tag(key, "entry", folder, date, content)

    def header_tag(self, key: bytes, folder: str, header: str) -> str:
        """Tag of a file's header (its text before the first date comment, stripped)."""
        return self._tag(key, "header", folder, header.strip())

    def document_tags(self, key: bytes, path: Path, doc: MemoryDocument) -> list[str]:
        """Tags of a whole parsed file: its header (when not blank) and every entry."""
        folder = self.folder(path)
        tags = [self.header_tag(key, folder, doc.header)] if doc.header.strip() else []
        tags.extend(self.entry_tag(key, folder, e.date, e.content) for e in doc.entries)
        return tags

    # -- the record ----------------------------------------------------------------------------

    def known(self) -> frozenset[str] | set[str]:
        """Tags on record (empty when there is no key or no record; a record that is a link,
        not a regular file, or over :data:`MAX_RECORD_BYTES` counts as empty, with a warning).

        Reads only what was appended since the last call (the record is append-only).
        """
        path = self.record_path
        try:
            checked(self.veil_dir, path)
            st = os.lstat(path)
        except FileNotFoundError:
            return frozenset()
        except Exception as exc:  # noqa: BLE001 - an unusable record trusts nothing
            _warn_once(str(path), f"memory provenance: {exc}; nothing is trusted")
            return frozenset()
        if st.st_size > MAX_RECORD_BYTES:
            _warn_once(
                str(path),
                f"memory provenance: {path} holds {st.st_size} bytes (over {MAX_RECORD_BYTES}); "
                "not read, nothing is trusted",
            )
            return frozenset()
        with _state_lock:
            rec = _records.get(str(path))
            if rec is not None and rec.ino == st.st_ino and rec.size == st.st_size:
                return rec.tags
            offset = rec.size if rec is not None and rec.ino == st.st_ino else 0
            if rec is not None and rec.ino == st.st_ino and st.st_size < rec.size:
                offset = 0  # truncated in place: read again
            try:
                data = read_bytes_nofollow(path, offset) or b""
            except Exception as exc:  # noqa: BLE001
                _warn_once(str(path), f"memory provenance: {exc}; nothing is trusted")
                return frozenset()
            if offset == 0 or rec is None:
                rec = _Record(st.st_ino, 0, set(), [], 0)
            whole = data[: data.rfind(b"\n") + 1]  # a torn last line waits for its end
            for line in whole.split(b"\n"):
                if _TAG_LINE.match(line):
                    tag = line.decode("ascii")
                    if tag not in rec.tags:
                        rec.tags.add(tag)
                        rec.order.append(tag)
            rec.size = offset + len(whole)
            if offset == 0:
                rec.pruned_at = len(rec.tags)
            _records[str(path)] = rec
            return rec.tags

    def _lock(self) -> filelock.FileLock:
        lock_path = checked(self.veil_dir, self.veil_dir / f"{RECORD_FILE}.lock")
        refuse_links(lock_path)
        return filelock.FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S)

    def record(self, tags: Iterable[str]) -> None:
        """Append ``tags`` (those not yet on record) to the record, under its lock.

        Raises:
            UnsafeVeilPath: the record or its lock is a symbolic link. MemoryBusy: lock timeout.
            OSError: ``.veil/`` is not writable.
        """
        known = self.known()
        new = [t for t in dict.fromkeys(tags) if t not in known]
        if not new:
            return
        self.veil_dir.mkdir(parents=True, exist_ok=True)
        path = checked(self.veil_dir, self.record_path)
        lock = self._lock()
        try:
            lock.acquire()
        except filelock.Timeout as exc:
            raise MemoryBusy(
                f"{path}: another writer holds its lock for over {LOCK_TIMEOUT_S} s"
            ) from exc
        try:
            data = b"".join(t.encode("ascii") + b"\n" for t in new)
            try:
                size = os.lstat(path).st_size
            except FileNotFoundError:
                size = -1
            if size < 0:
                data = RECORD_HEADER + data
                ensure_gitignore(self.project_dir)  # `veil memory write` alone opens no Veil
            elif size and read_bytes_nofollow(path, size - 1) != b"\n":
                data = b"\n" + data  # close a torn last line first
            append_bytes_nofollow(path, data)
            tags_now = self.known()
            rec = _records.get(str(path))
            if rec is not None and len(tags_now) > max(PRUNE_MIN_TAGS, 2 * rec.pruned_at):
                self._prune(rec)
        finally:
            lock.release()

    def _prune(self, rec: _Record) -> None:
        # Caller holds the record's lock. Keep tags of what is in a memory file now, plus the
        # newest ones (a writer may have recorded a tag and not yet written its file).
        key = load_key(create=False)
        if key is None:
            return
        live: set[str] = set(rec.order[-PRUNE_KEEP_NEWEST:])
        for path in self._memory_files():
            try:
                data = read_bytes_nofollow(path)
                text = data.decode("utf-8") if data is not None else ""
            except Exception:  # noqa: BLE001 - a broken file keeps nothing of its own
                continue
            live.update(self.document_tags(key, path, parse(text)))
        kept = [t for t in rec.order if t in live]
        body = RECORD_HEADER + b"".join(t.encode("ascii") + b"\n" for t in kept)
        remove_interrupted_temps(self.veil_dir, RECORD_FILE)  # a pruning cut short before
        core_atomic_write(self.record_path, body)
        with _state_lock:
            _records.pop(str(self.record_path), None)
        self.known()
        log.info(
            "memory provenance: pruned %d tags, %d kept", len(rec.order) - len(kept), len(kept)
        )

    def _memory_files(self) -> list[Path]:
        # Every *.md under .veil/memory, folders and files that are links skipped (never read).
        out = []
        for dirpath, dirnames, filenames in os.walk(self.memory_root, followlinks=False):
            dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
            for name in filenames:
                full = Path(dirpath) / name
                if name.endswith(".md") and not name.startswith(".") and not full.is_symlink():
                    out.append(full)
        return out

    # -- where tags are kept (a shared store's provenance overrides these) -----------------------

    def signing_key(self, create: bool) -> bytes | None:
        """The key tags are made with: the user's (:func:`load_key`), created when missing and
        ``create`` is true; None when there is none."""
        return load_key(create=create)

    def known_among(self, tags: list[str]) -> set[str]:
        """Those of ``tags`` on record."""
        known = self.known()
        return {t for t in tags if t in known}

    # -- questions readers ask -----------------------------------------------------------------

    def trust_of(self, path: Path, doc: MemoryDocument) -> FileTrust:
        """Which parts of ``doc`` (the parsed text of ``path``) veil wrote."""
        key = self.signing_key(create=False)
        if key is None:
            return FileTrust(header=not doc.header.strip(), entries=(False,) * len(doc.entries))
        folder = self.folder(path)
        header_tag = self.header_tag(key, folder, doc.header) if doc.header.strip() else None
        entry_tags = [self.entry_tag(key, folder, e.date, e.content) for e in doc.entries]
        wanted = [*entry_tags, *([header_tag] if header_tag else [])]
        known = self.known_among(wanted) if wanted else set()
        header = header_tag is None or header_tag in known
        return FileTrust(header=header, entries=tuple(t in known for t in entry_tags))

    # -- what writers call ---------------------------------------------------------------------

    def entry_tags(self, path: Path, date: str, content: str) -> list[str]:
        """The tag an entry about to be written gets ([] when there is no key, with a warning
        once); a writer records it with :meth:`record` before (disk) or with (shared store) the
        write."""
        key = self.signing_key(create=True)
        return [] if key is None else [self.entry_tag(key, self.folder(path), date, content)]

    def text_tags(self, path: Path, text: str) -> list[str]:
        """The tags of the header and every entry of ``text`` as the file ``path`` (``PUT``,
        ``trust``; [] when there is no key)."""
        key = self.signing_key(create=True)
        return [] if key is None else self.document_tags(key, path, parse(text))

    def record_entry(self, path: Path, date: str, content: str) -> None:
        """Record that veil is about to write an entry (call before writing the file).

        Raises:
            as :meth:`record`; nothing is recorded (with a warning) when there is no key.
        """
        tags = self.entry_tags(path, date, content)
        if tags:
            self.record(tags)

    def record_text(self, path: Path, text: str) -> None:
        """Record the header and every entry of ``text`` as veil-written (``PUT``, ``trust``).

        Raises:
            as :meth:`record`.
        """
        tags = self.text_tags(path, text)
        if tags:
            self.record(tags)


def clear_caches() -> None:
    """Forget cached keys and records (tests that change ``VEIL_HOME`` or rewrite records)."""
    with _state_lock:
        _keys.clear()
        _records.clear()
        _warned.clear()
