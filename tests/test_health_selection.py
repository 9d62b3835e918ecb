"""Which deployments checks/health looks at, and what it says when there is none."""

from pathlib import Path

from gpuharness.core.registry import Registry

CHECKS = Path(__file__).resolve().parents[1] / "checks" / "health"


def test_no_deployment_awaiting_health_is_said_plainly(pytester, tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    result = pytester.runpytest_subprocess(str(CHECKS), "--registry", str(registry.root), "-rs", "-p", "no:html")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*no deployment awaiting health in*deployments.json*pass --deployment ID*"])

