"""The seccomp filters systemd 252 builds from a unit, loaded with libseccomp (ctypes).

Mirrors ``src/shared/seccomp-util.c``: one filter per directive, each with its own
default action; the kernel applies them all and the strictest answer wins.
``SystemCallFilter=`` lines combine in order (the first decides allow- or deny-list;
``SystemCallErrorNumber=`` makes a refused call fail instead of killing);
groups are expanded by ``systemd-analyze syscall-filter``. ``RestrictNamespaces=``
refuses ``unshare``/``clone`` with a forbidden flag and ``setns`` into one (EPERM), and
makes ``clone3`` ENOSYS, whose flags seccomp cannot see, so that libc falls back to
``clone``.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

from tests.unitsim.unitfile import Directives, boolean, last, words

__all__ = ["build_filters", "expand_group", "load_filters"]

ALLOW = 0x7FFF0000
KILL_PROCESS = 0x80000000
_ATTR_ACT_BADARCH = 2
_ATTR_CTL_NNP = 3
NE, LT, EQ, GT, MASKED_EQ = 1, 2, 4, 6, 7

NAMESPACE_FLAGS = {
    "cgroup": 0x02000000,
    "ipc": 0x08000000,
    "net": 0x40000000,
    "mnt": 0x00020000,
    "pid": 0x20000000,
    "user": 0x10000000,
    "uts": 0x04000000,
}
ALL_NAMESPACES = sum(NAMESPACE_FLAGS.values())
_AF_MAX = 46
_AF = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17}


def errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _Cmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


@dataclass(frozen=True)
class Rule:
    action: int
    syscall: str
    args: tuple[tuple[int, int, int, int], ...] = ()  # (arg, op, a, b)


@dataclass(frozen=True)
class Filter:
    name: str
    default: int
    rules: tuple[Rule, ...]


@functools.cache
def _groups() -> dict[str, tuple[str, ...]]:
    """Every group ``systemd-analyze syscall-filter`` knows, with its direct members."""
    out = subprocess.run(
        ["systemd-analyze", "syscall-filter", "--no-pager"],
        capture_output=True,
        text=True,
        check=True,
        env={"SYSTEMD_COLORS": "0", "PATH": "/usr/bin:/bin"},
    ).stdout
    groups: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        item = line.strip()
        if not item or item.startswith("#"):
            continue
        if not line[0].isspace():
            current = groups.setdefault(item, []) if item.startswith("@") else None
        elif current is not None:
            current.append(item)
    return {name: tuple(members) for name, members in groups.items()}


def expand_group(name: str) -> set[str]:
    """System calls of ``@group`` (nested groups expanded), or ``{name}`` for a call."""
    if not name.startswith("@"):
        return {name}
    calls: set[str] = set()
    pending, seen = [name], set()
    while pending:
        group = pending.pop()
        if group in seen:
            continue
        seen.add(group)
        members = _groups().get(group)
        if members is None:
            raise ValueError(f"systemd-analyze knows no system call group {group}")
        for member in members:
            (pending.append(member) if member.startswith("@") else calls.add(member))
    return calls


def _syscall_filter(directives: Directives) -> Filter | None:
    lines = directives.get("SystemCallFilter", [])
    if not lines:
        return None
    allow_list = not lines[0].startswith("~")
    chosen: set[str] = expand_group("@default") if allow_list else set()
    for line in lines:
        invert = line.startswith("~")
        names: set[str] = set()
        for word in words(line.removeprefix("~")):
            names |= expand_group(word)
        if invert == (not allow_list):
            chosen |= names  # same polarity as the first line: add
        else:
            chosen -= names
    refuse = KILL_PROCESS
    if number := last(directives, "SystemCallErrorNumber"):
        refuse = errno_action(getattr(errno, number) if not number.isdigit() else int(number))
    if allow_list:
        rules = tuple(Rule(ALLOW, name) for name in sorted(chosen))
        return Filter("SystemCallFilter", refuse, rules)
    return Filter("SystemCallFilter", ALLOW, tuple(Rule(refuse, n) for n in sorted(chosen)))


def namespaces_retained(values: list[str]) -> int | None:
    """Flags RestrictNamespaces= lets through; None when the directive is absent."""
    if not values:
        return None
    retained: int | None = None
    for value in values:
        if value.lower() in ("yes", "true"):
            current = 0
        elif value.lower() in ("no", "false", ""):
            current = ALL_NAMESPACES
        else:
            inverted = value.startswith("~")
            flags = sum(NAMESPACE_FLAGS[w] for w in value.removeprefix("~").split())
            current = ALL_NAMESPACES & ~flags if inverted else flags
            if retained is not None:  # lists merge by OR (AND for ~lists)
                current = retained & current if inverted else retained | current
        retained = current
    return retained


def _restrict_namespaces(directives: Directives) -> Filter | None:
    retain = namespaces_retained(directives.get("RestrictNamespaces", []))
    if retain is None or retain == ALL_NAMESPACES:
        return None
    eperm = errno_action(errno.EPERM)
    rules = [Rule(errno_action(errno.ENOSYS), "clone3")]
    if retain == 0:
        rules.append(Rule(eperm, "setns"))
    else:
        rules.append(Rule(eperm, "setns", ((1, EQ, 0, 0),)))
    for flag in NAMESPACE_FLAGS.values():
        if retain & flag == flag:
            continue
        rules.append(Rule(eperm, "unshare", ((0, MASKED_EQ, flag, flag),)))
        rules.append(Rule(eperm, "clone", ((0, MASKED_EQ, flag, flag),)))
        if retain != 0:
            rules.append(Rule(eperm, "setns", ((1, MASKED_EQ, flag, flag),)))
    return Filter("RestrictNamespaces", ALLOW, tuple(rules))


def _address_families(directives: Directives) -> Filter | None:
    value = last(directives, "RestrictAddressFamilies")
    if not value or value == "none":
        return None
    if value.startswith("~"):
        deny = {_AF[w] for w in value[1:].split()}
        act = errno_action(errno.EAFNOSUPPORT)
        return Filter(
            "RestrictAddressFamilies",
            ALLOW,
            tuple(Rule(act, "socket", ((0, EQ, af, 0),)) for af in deny),
        )
    allowed = {_AF[w] for w in value.split()}
    act = errno_action(errno.EAFNOSUPPORT)
    first, top = min(allowed), max(allowed)
    rules = [
        Rule(act, "socket", ((0, LT, first, 0),)),
        Rule(act, "socket", ((0, GT, top, 0),)),
    ]
    rules += [
        Rule(act, "socket", ((0, EQ, af, 0),))
        for af in range(first, top + 1)
        if af not in allowed and af < _AF_MAX
    ]
    return Filter("RestrictAddressFamilies", ALLOW, tuple(rules))


def _memory_deny_write_execute() -> Filter:
    eperm = errno_action(errno.EPERM)
    prot_exec, prot_write, shm_exec = 0x4, 0x2, 0o100000
    both = prot_exec | prot_write
    return Filter(
        "MemoryDenyWriteExecute",
        ALLOW,
        (
            Rule(eperm, "mmap", ((2, MASKED_EQ, both, both),)),
            Rule(eperm, "mprotect", ((2, MASKED_EQ, prot_exec, prot_exec),)),
            Rule(eperm, "pkey_mprotect", ((2, MASKED_EQ, prot_exec, prot_exec),)),
            Rule(eperm, "shmat", ((2, MASKED_EQ, shm_exec, shm_exec),)),
        ),
    )


def _restrict_suid_sgid() -> Filter:
    eperm = errno_action(errno.EPERM)
    bits = 0o6000
    o_creat = 0o100
    return Filter(
        "RestrictSUIDSGID",
        ALLOW,
        (
            Rule(eperm, "chmod", ((1, MASKED_EQ, bits & 0o4000, 0o4000),)),
            Rule(eperm, "chmod", ((1, MASKED_EQ, 0o2000, 0o2000),)),
            Rule(eperm, "fchmod", ((1, MASKED_EQ, 0o4000, 0o4000),)),
            Rule(eperm, "fchmod", ((1, MASKED_EQ, 0o2000, 0o2000),)),
            Rule(eperm, "fchmodat", ((2, MASKED_EQ, 0o4000, 0o4000),)),
            Rule(eperm, "fchmodat", ((2, MASKED_EQ, 0o2000, 0o2000),)),
            Rule(eperm, "creat", ((1, MASKED_EQ, 0o4000, 0o4000),)),
            Rule(eperm, "creat", ((1, MASKED_EQ, 0o2000, 0o2000),)),
            Rule(
                eperm, "openat", ((2, MASKED_EQ, o_creat, o_creat), (3, MASKED_EQ, 0o4000, 0o4000))
            ),
            Rule(
                eperm, "openat", ((2, MASKED_EQ, o_creat, o_creat), (3, MASKED_EQ, 0o2000, 0o2000))
            ),
        ),
    )


def _simple(name: str, action: int, calls: Iterable[str]) -> Filter:
    return Filter(name, ALLOW, tuple(Rule(action, c) for c in calls))


def build_filters(directives: Directives) -> list[Filter]:
    """Every seccomp filter systemd would load for these directives."""
    eperm = errno_action(errno.EPERM)
    found = [
        _syscall_filter(directives),
        _restrict_namespaces(directives),
        _address_families(directives),
    ]
    if boolean(directives, "MemoryDenyWriteExecute"):
        found.append(_memory_deny_write_execute())
    if boolean(directives, "RestrictSUIDSGID"):
        found.append(_restrict_suid_sgid())
    if boolean(directives, "LockPersonality"):
        found.append(
            Filter("LockPersonality", ALLOW, (Rule(eperm, "personality", ((0, NE, 0, 0),)),))
        )
    if boolean(directives, "RestrictRealtime"):
        realtime = (1, 2, 6)  # SCHED_FIFO, SCHED_RR, SCHED_DEADLINE
        rules = tuple(Rule(eperm, "sched_setscheduler", ((1, EQ, p, 0),)) for p in realtime)
        found.append(Filter("RestrictRealtime", ALLOW, rules))
    if boolean(directives, "ProtectClock"):
        found.append(_simple("ProtectClock", eperm, expand_group("@clock")))
    if boolean(directives, "ProtectHostname"):
        found.append(_simple("ProtectHostname", eperm, ("sethostname", "setdomainname")))
    if boolean(directives, "ProtectKernelLogs"):
        found.append(_simple("ProtectKernelLogs", eperm, ("syslog",)))
    if boolean(directives, "ProtectKernelModules"):
        found.append(_simple("ProtectKernelModules", eperm, expand_group("@module")))
    # The allow-list last, as systemd loads it: once it is in, seccomp() itself is refused.
    return [f for f in found[1:] if f is not None] + [f for f in found[:1] if f is not None]


def load_filters(filters: list[Filter]) -> None:
    """Load each filter into this process (no_new_privs must already be set)."""
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_exact_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_Cmp),
    ]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    for one in filters:
        ctx = lib.seccomp_init(one.default)
        if not ctx:
            raise OSError(f"seccomp_init failed for {one.name}")
        try:
            _check(lib.seccomp_attr_set(ctx, _ATTR_CTL_NNP, 0), one.name, "attr")
            for rule in one.rules:
                number = lib.seccomp_syscall_resolve_name(rule.syscall.encode())
                if number < 0:
                    continue  # not a system call of this architecture
                cmps = (_Cmp * max(1, len(rule.args)))(*(_Cmp(*a) for a in rule.args))
                result = lib.seccomp_rule_add_exact_array(
                    ctx, rule.action, number, len(rule.args), cmps
                )
                _check(result, one.name, rule.syscall)
            _check(lib.seccomp_load(ctx), one.name, "load")
        finally:
            lib.seccomp_release(ctx)


def _check(result: int, name: str, what: str) -> None:
    if result < 0:
        raise OSError(-result, f"seccomp {name}: {what} failed")
