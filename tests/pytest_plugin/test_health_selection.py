"""Which deployments checks/health looks at, and what it says when there is none."""

from checkout import ROOT

from gpuharness.core.registry import Registry

CHECKS = ROOT / "checks" / "health"


def test_no_deployment_awaiting_health_is_said_plainly_and_is_not_a_pass(pytester, tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    result = pytester.runpytest_subprocess(str(CHECKS), "--registry", str(registry.root), "-rs", "-p", "no:html")
    assert result.ret == 1  # nothing checked is not a pass
    result.stdout.fnmatch_lines(["*no deployment awaiting health in*deployments.json*pass --deployment ID*"])
    said = [line for line in result.outlines if "no deployment was checked" in line]
    assert len(said) == 1, result.outlines
    assert "gpuharness provision" in said[0] and "--deployment ID" in said[0]


def test_health_without_a_registry_is_not_a_pass(pytester, tmp_path):
    result = pytester.runpytest_subprocess(str(CHECKS), "--registry", str(tmp_path / "nowhere"), "-p", "no:html")
    assert result.ret == 1
    said = [line for line in result.outlines if "no deployment was checked" in line]
    assert len(said) == 1, result.outlines
    assert f"registry {tmp_path / 'nowhere'} not found" in said[0] and "gpuharness init" in said[0]


def test_a_deselected_health_run_keeps_pytests_own_exit_code(pytester, tmp_path):
    """A deselected run (-k matching nothing) is pytest's own "no tests ran"; our line only speaks for skips."""
    registry = Registry(tmp_path / "reg")
    registry.init()
    result = pytester.runpytest_subprocess(str(CHECKS), "--registry", str(registry.root), "-p", "no:html",
                                           "-k", "no_such_check")
    assert result.ret == 5
    assert not [line for line in result.outlines if "no deployment was checked" in line]

