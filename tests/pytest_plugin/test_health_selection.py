"""Which deployments checks/health looks at, and what it says when there is none."""

from checkout import ROOT

from gpuharness.core.registry import Registry

CHECKS = ROOT / "checks" / "health"


def test_no_deployment_awaiting_health_is_said_plainly(pytester, tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    result = pytester.runpytest_subprocess(str(CHECKS), "--registry", str(registry.root), "-rs", "-p", "no:html")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no deployment awaiting health in*deployments.json*pass --deployment ID*"])

