"""bwrap's failure messages become the setting to blame, under systemd and elsewhere."""

from __future__ import annotations

import signal

from core.tools.sandbox_diagnosis import explain_probe_failure

NO_USERNS = "bwrap: No permissions to create new namespace, likely because the kernel..."
NO_PROC = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted"
NO_NETLINK = "bwrap: loopback: Failed to create NETLINK_ROUTE socket: Address family not supported"


def test_under_systemd_the_directive_is_named() -> None:
    unit = "familiar.service"
    assert "RestrictNamespaces=" in explain_probe_failure(NO_USERNS, 1, unit=unit)
    assert "ProtectKernelTunables=" in explain_probe_failure(NO_PROC, 1, unit=unit)
    assert "AF_NETLINK" in explain_probe_failure(NO_NETLINK, 1, unit=unit)
    killed = explain_probe_failure("", -signal.SIGSYS, unit=unit)
    assert "SystemCallFilter=" in killed and "familiar service install" in killed
    assert explain_probe_failure(NO_PROC, 1, unit="").startswith("under systemd: ")


def test_elsewhere_the_host_setting_is_named() -> None:
    assert "unprivileged_userns_clone" in explain_probe_failure(NO_USERNS, 1, unit=None)
    assert "container" in explain_probe_failure(NO_PROC, 1, unit=None)
    assert "systemd" not in explain_probe_failure(NO_NETLINK, 1, unit=None)
