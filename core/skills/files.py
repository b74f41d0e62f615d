"""Reading skills from disk: finding the folders, their ``SKILL.md`` and their other files.

Blocking: call these in a worker thread. The daemon reads with its own rights while
``exec`` may plant links in the workspace, so nothing here follows a link out of the
workspace: a workspace skill folder reached through a link counts only when the link
resolves inside the workspace, and every read below a skill's folder follows no link
at all (`core.workspace_read`). A home skill's folder may itself be a link (the
operator's own files); below it, the same rule holds.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from core.errors import ToolFailed, ToolRetry
from core.skills.model import Skill, SkillFolder, SkillProblem, SkillSource
from core.skills.parse import SkillFileError, parse_skill_text
from core.workspace_read import read_workspace_text

__all__ = [
    "MAX_SKILL_FILE_BYTES",
    "SKILL_FILE",
    "list_skill_files",
    "load_skills",
    "read_skill_file",
    "skills_signature",
]

SKILL_FILE = "SKILL.md"
_SKILL_FILES = (SKILL_FILE, "skill.md")
"""The names a skill's file may have (``skill.md``: what the reference library accepts)."""
MAX_SKILL_FILE_BYTES = 512 * 1024
_MAX_FOLDERS = 2000
"""Skill folders read per source (the rest is reported, not read)."""
_MAX_LISTED = 200
_MAX_DEPTH = 6
_SKIPPED = frozenset({"node_modules", "__pycache__"})
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def load_skills(sources: Sequence[SkillSource]) -> tuple[list[Skill], list[SkillProblem]]:
    """Every skill of ``sources``, the first of each name (sources in precedence order,
    folders by name within one), and what is wrong with any file."""
    skills: dict[str, Skill] = {}
    problems: list[SkillProblem] = []
    for source in sources:
        for skill in _read_source(source, problems):
            first = skills.get(skill.name)
            if first is None:
                skills[skill.name] = skill
            elif first.folder != skill.folder:  # else a link to the same folder (installers)
                problems.append(
                    SkillProblem(
                        str(skill.file),
                        None,
                        f"duplicate: skill {skill.name!r} is already loaded from {first.file}, "
                        "which comes first; this one is not used",
                        severity="warning",
                        skill=skill.name,
                    )
                )
    return list(skills.values()), problems


def skills_signature(sources: Sequence[SkillSource]) -> tuple[tuple[str, int, int], ...]:
    """What changes when a skill is added, removed or edited: each ``SKILL.md`` with its
    modification time and size."""
    seen: list[tuple[str, int, int]] = []
    for source in sources:
        root = source.root
        try:
            names = sorted(os.listdir(root))[:_MAX_FOLDERS]
        except OSError:
            continue
        for name in names:
            for file in _SKILL_FILES:
                with contextlib.suppress(OSError):
                    info = os.stat(root / name / file)
                    seen.append((str(root / name / file), info.st_mtime_ns, info.st_size))
    return tuple(seen)


def list_skill_files(skill: Skill) -> tuple[list[str], bool]:
    """The files of a skill's folder but its ``SKILL.md`` (relative POSIX paths, sorted;
    links, hidden files, ``node_modules`` and ``__pycache__`` left out), and whether the
    list was cut short."""
    found: list[str] = []
    try:
        fd = _open_folder(skill.folder)
    except OSError:
        return found, False
    try:
        complete = _walk(fd, PurePosixPath(), found, depth=0)
    finally:
        os.close(fd)
    return [f for f in found if f != skill.file.name], not complete


def read_skill_file(skill: Skill, path: str, *, max_bytes: int) -> str:
    """The text of one file of ``skill``, ``path`` relative to its folder.

    Raises:
        ToolRetry: the path leaves the folder, or names no regular file reached without
            a link.
        ToolFailed: the file cannot be read, or is binary.
    """
    relative = _relative(path)
    try:
        read = read_workspace_text(
            skill.folder.anchor,
            Path(*skill.folder.parts, *relative.parts),
            max_bytes=max_bytes,
            encoding="utf-8",
        )
    except OSError as exc:
        raise ToolFailed(f"cannot read {path}: {exc.strerror or exc}") from exc
    if read is None:
        raise ToolRetry(
            f"skill {skill.name!r} has no file {path!r} (a regular file in its folder, "
            "reached without a link); its files are listed when it is loaded"
        )
    if "\x00" in read.text[:8192]:
        raise ToolFailed(f"{path} looks like a binary file ({read.size} bytes); not shown")
    if read.truncated:
        return read.text + (
            f"\n[... truncated: {path} is {read.size} bytes, showing the first {max_bytes} ...]"
        )
    return read.text


def _relative(path: str) -> PurePosixPath:
    if not path.strip() or "\x00" in path:
        raise ToolRetry(f"invalid path {path!r}")
    pure = PurePosixPath(path.strip().replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts:
        raise ToolRetry(
            f"path {path!r} leaves the skill's folder: give a path relative to it, without '..'"
        )
    parts = [p for p in pure.parts if p not in ("", ".")]
    if not parts:
        raise ToolRetry(f"path {path!r} names the skill's folder, not a file")
    return PurePosixPath(*parts)


def _read_source(source: SkillSource, problems: list[SkillProblem]) -> list[Skill]:
    root = source.root
    try:
        names = sorted(os.listdir(root))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        problems.append(SkillProblem(str(root), None, f"cannot list: {exc.strerror or exc}"))
        return []
    anchor = source.anchor.resolve()
    if source.scope == "workspace" and not root.resolve().is_relative_to(anchor):
        problems.append(SkillProblem(str(root), None, "a link out of the workspace: not followed"))
        return []
    if len(names) > _MAX_FOLDERS:
        problems.append(
            SkillProblem(str(root), None, f"more than {_MAX_FOLDERS} entries: the rest not read")
        )
    skills = []
    for name in names[:_MAX_FOLDERS]:
        if name.startswith("."):
            continue
        if name in _SKILL_FILES:
            problems.append(
                SkillProblem(
                    str(root / name),
                    None,
                    f"a skill is a folder of its own: move it to {root}/<skill-name>/{SKILL_FILE}",
                )
            )
            continue
        skill = _read_folder(source, anchor, name, problems)
        if skill is not None:
            skills.append(skill)
    return skills


def _read_folder(
    source: SkillSource, anchor: Path, name: str, problems: list[SkillProblem]
) -> Skill | None:
    shown = source.root / name
    real = shown.resolve()
    if not real.is_dir():
        return None
    if source.scope == "workspace":
        if not real.is_relative_to(anchor):
            problems.append(
                SkillProblem(str(shown), None, "a link out of the workspace: not followed")
            )
            return None
        folder = SkillFolder(anchor, real.relative_to(anchor).parts)
    else:
        folder = SkillFolder(real)
    file_name = next((f for f in _SKILL_FILES if os.path.lexists(real / f)), None)
    if file_name is None:
        return None  # a folder of something else (OpenClaw keeps other things here)
    file = shown / file_name
    try:
        read = read_workspace_text(
            folder.anchor, Path(*folder.parts, file_name), max_bytes=MAX_SKILL_FILE_BYTES
        )
    except OSError as exc:
        problems.append(SkillProblem(str(file), None, f"cannot read: {exc.strerror or exc}"))
        return None
    if read is None:
        problems.append(
            SkillProblem(str(file), None, "not a regular file (links are not followed)")
        )
        return None
    if read.truncated:
        problems.append(
            SkillProblem(str(file), None, f"larger than {MAX_SKILL_FILE_BYTES} bytes: not read")
        )
        return None
    try:
        parsed = parse_skill_text(read.text, folder_name=real.name)
    except SkillFileError as exc:
        problems.append(SkillProblem(str(file), exc.line, str(exc)))
        return None
    problems.extend(
        SkillProblem(str(file), line, message, severity="warning", skill=parsed.name)
        for line, message in parsed.warnings
    )
    return Skill(
        name=parsed.name,
        description=parsed.description,
        body=parsed.body,
        file=file,
        folder=folder,
        source=source,
        license=parsed.license,
        compatibility=parsed.compatibility,
        metadata=parsed.metadata,
        allowed_tools=parsed.allowed_tools,
        allowed_tools_raw=parsed.allowed_tools_raw,
        model_invocable=parsed.model_invocable,
    )


def _open_folder(folder: SkillFolder) -> int:
    """A descriptor of the folder, reached from its anchor without following a link."""
    fd = os.open(folder.anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in folder.parts:
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _walk(fd: int, prefix: PurePosixPath, found: list[str], *, depth: int) -> bool:
    """Append the regular files below ``fd``; False when the cap cut the walk short."""
    with os.scandir(fd) as scan:
        entries = sorted(scan, key=lambda e: e.name)
    for entry in _listable(entries):
        if len(found) >= _MAX_LISTED:
            return False
        mode = entry.stat(follow_symlinks=False).st_mode
        if stat.S_ISREG(mode):
            found.append(str(prefix / entry.name))
        elif stat.S_ISDIR(mode) and depth < _MAX_DEPTH:
            try:
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                if not _walk(child, prefix / entry.name, found, depth=depth + 1):
                    return False
            finally:
                os.close(child)
    return True


def _listable(entries: Iterable[os.DirEntry[str]]) -> Iterable[os.DirEntry[str]]:
    return (e for e in entries if not e.name.startswith(".") and e.name not in _SKIPPED)
