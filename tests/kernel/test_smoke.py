import pytest


@pytest.mark.django_db(databases="__all__")
def test_probes_answer(client):
    assert client.get("/healthz").status_code == 200
    response = client.get("/v1/api/outreach/healthz")
    assert response.status_code == 200
    assert response["X-Request-Id"]


def test_unknown_route_is_a_problem(client):
    response = client.get("/v1/api/outreach/nope")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "NOT_FOUND"
