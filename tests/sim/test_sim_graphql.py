"""The simulated RunPod GraphQL API and Serverless stream / purge-queue over loopback HTTP: GraphQL's language
(variables, aliases, fragments, directives), its error shapes and status codes, and one state with REST v2."""

from __future__ import annotations

from collections.abc import Iterator
from secrets import token_hex

import httpx
import pytest

from gpuharness.sim import Simulator

KEY = "sim-graphql-key-" + token_hex(8)  # made per run
GPU = "NVIDIA GeForce RTX 4090"
DEPLOY = """mutation Deploy($input: PodFindAndDeployOnDemandInput!) {
  pod: podFindAndDeployOnDemand(input: $input) { id ...Basics machine { gpuDisplayName } } }
fragment Basics on Pod { name desiredStatus costPerHr env ports }"""


@pytest.fixture
def client(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.base_url, headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as c:
        yield c


def gql(client: httpx.Client, query: str, variables: dict | None = None, status: int = 200) -> dict:
    body: dict = {"query": query}
    if variables is not None:
        body["variables"] = variables
    answer = client.post("/runpod/graphql", json=body)
    assert answer.status_code == status, answer.text
    return answer.json()


def deploy(client: httpx.Client, **spec: object) -> dict:
    given = {"gpuTypeId": GPU, "imageName": "img:1", "cloudType": "SECURE", "name": "gh-gql", **spec}
    return gql(client, DEPLOY, {"input": given})


def test_a_deployed_pod_answers_only_what_was_selected_under_its_alias(client: httpx.Client):
    answer = deploy(client, env=[{"key": "A", "value": "b"}], ports="8188/http,22/tcp", gpuCount=2)
    pod = answer["data"]["pod"]
    assert set(pod) == {"id", "name", "desiredStatus", "costPerHr", "env", "ports", "machine"}
    assert pod["env"] == ["A=b"] and pod["ports"] == "8188/http,22/tcp" and pod["costPerHr"] == 1.38
    assert pod["machine"] == {"gpuDisplayName": "RTX 4090"} and "errors" not in answer


def test_graphql_and_rest_v2_share_one_state(client: httpx.Client):
    pod_id = deploy(client)["data"]["pod"]["id"]
    [rest] = client.get("/runpod/v2/pods").json()["pods"]
    assert rest["id"] == pod_id and rest["name"] == "gh-gql"
    client.post(f"/runpod/v2/pods/{pod_id}/action", json={"action": "stop"})
    seen = gql(client, 'query { pod(input: {podId: "POD"}) { desiredStatus runtime { uptimeInSeconds } } }'
               .replace("POD", pod_id))
    assert seen["data"]["pod"] == {"desiredStatus": "EXITED", "runtime": None}
    gql(client, "mutation T($id: String!) { podTerminate(input: {podId: $id}) }", {"id": pod_id})
    assert client.get("/runpod/v2/pods").json()["pods"] == []


def test_directives_typename_and_the_lowest_price_argument(client: httpx.Client):
    query = """query Q($full: Boolean!) { gpuTypes(input: {id: "GPU"}) { __typename id
      securePrice @include(if: $full) communityPrice @skip(if: $full)
      lowestPrice(input: {gpuCount: 2}) { uninterruptablePrice stockStatus } } }""".replace("GPU", GPU)
    [short] = gql(client, query, {"full": False})["data"]["gpuTypes"]
    [full] = gql(client, query, {"full": True})["data"]["gpuTypes"]
    assert short == {"__typename": "GpuType", "id": GPU, "communityPrice": 0.34,
                     "lowestPrice": {"uninterruptablePrice": 0.34, "stockStatus": "High"}}
    assert "securePrice" in full and "communityPrice" not in full


def test_a_capacity_refusal_is_supply_constraint_with_the_fields_path(client: httpx.Client):
    answer = deploy(client, gpuTypeId="NVIDIA Quantum 9000")
    [error] = answer["errors"]
    assert error["extensions"]["code"] == "SUPPLY_CONSTRAINT" and error["path"] == ["pod"]
    assert error["message"].startswith("There are no longer any instances available")
    assert answer["data"] == {"pod": None}


@pytest.mark.parametrize(("query", "variables", "message", "code"), [
    ("query { myself { pods { id nope } } }", None, 'Cannot query field "nope" on type "Pod".',
     "GRAPHQL_VALIDATION_FAILED"),
    ("query { myself { pods } }", None, 'Field "pods" of type "[Pod]" must have a selection of subfields.',
     "GRAPHQL_VALIDATION_FAILED"),
    ("query { myself { id { x } } }", None, 'Field "id" must not have a selection', "GRAPHQL_VALIDATION_FAILED"),
    ("query { pod(podId: \"x\") { id } }", None, 'Unknown argument "podId" on field "Query.pod".',
     "GRAPHQL_VALIDATION_FAILED"),
    ("query { myself { id }", None, "Syntax Error: Expected Name, found <EOF>.", "GRAPHQL_PARSE_FAILED"),
    ("query Q($i: PodFilter!) { pod(input: $i) { id } }", {}, 'Variable "$i" of required type "PodFilter!" was '
     "not provided.", "BAD_USER_INPUT"),
    ("subscription { myself { id } }", None, "subscription operations are not supported",
     "GRAPHQL_VALIDATION_FAILED"),
])
def test_a_refused_document_is_a_400_with_graphqls_error_shape(client: httpx.Client, query: str,
                                                               variables: dict | None, message: str, code: str):
    [error] = gql(client, query, variables, status=400)["errors"]
    assert error["message"].startswith(message) and error["extensions"]["code"] == code


def test_a_body_without_a_query_is_a_400(client: httpx.Client):
    answer = client.post("/runpod/graphql", json={"variables": {}})
    assert answer.status_code == 400 and answer.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


def test_faults_on_graphql_take_its_shape_and_mutations_are_launches(sim: Simulator, client: httpx.Client):
    sim.inject(provider="runpod", fault="capacity")  # capacity only hits launches
    listed = gql(client, "{ myself { pods { id } } }")
    refused = deploy(client)
    assert listed == {"data": {"myself": {"pods": []}}}
    assert refused["errors"][0]["extensions"]["code"] == "SUPPLY_CONSTRAINT" and refused["data"] is None
    assert httpx.post(sim.base_url + "/runpod/graphql", json={"query": "{ myself { id } }"}).status_code == 401


def test_interruptible_pods_rent_at_the_bid_and_refuse_a_low_one(client: httpx.Client):
    query = "mutation R($i: PodRentInterruptableInput!) { podRentInterruptable(input: $i) { podType costPerHr } }"
    spot = {"gpuTypeId": GPU, "imageName": "img", "cloudType": "ALL", "gpuCount": 1}
    rented = gql(client, query, {"i": {**spot, "bidPerGpu": 0.3}})["data"]["podRentInterruptable"]
    low = gql(client, query, {"i": {**spot, "bidPerGpu": 0.01}})
    assert rented == {"podType": "INTERRUPTABLE", "costPerHr": 0.3}
    assert low["data"] == {"podRentInterruptable": None} and "bid" in low["errors"][0]["message"]


def test_serverless_stream_sends_each_chunk_once_and_purge_drops_queued_jobs(sim: Simulator, client: httpx.Client):
    base = "/runpod-serverless/v2/ep1"
    job = client.post(f"{base}/run", json={"input": {"stream": ["a", "b"]}}).json()
    first = client.get(f"{base}/stream/{job['id']}").json()
    again = client.get(f"{base}/stream/{job['id']}").json()
    assert first == {"status": "COMPLETED", "stream": [{"output": "a"}, {"output": "b"}]}
    assert again == {"status": "COMPLETED", "stream": []}
    assert client.get(f"{base}/status/{job['id']}").json()["output"] == ["a", "b"]
    sim.state.ready_delay_s = 60.0
    queued = [client.post(f"{base}/run", json={"input": {"n": n}}).json()["id"] for n in range(2)]
    assert client.post(f"{base}/purge-queue").json() == {"removed": 2, "status": "completed"}
    assert all(client.get(f"{base}/status/{j}").status_code == 404 for j in queued)
    assert client.get(f"{base}/stream/nope").status_code == 404
