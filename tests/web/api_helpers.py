"""Tokens for the API tests: one per scope in team alpha, one for the outsider's team beta."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ctxsim.api import tokens


@dataclass
class Tokens:
    ingest: str
    read: str
    both: str
    other: str  # team beta, both scopes
    revoked: str


@pytest.fixture
def api_tokens(personas) -> Tokens:
    owner = personas.users["owner"]
    made = {
        name: tokens.create_token(personas.team, name, scopes, user=owner)
        for name, scopes in (("ingest", "ingest"), ("read", "read"), ("both", "ingest,read"),
                             ("revoked", "ingest,read"))
    }
    tokens.revoke(made["revoked"][0])
    _, other = tokens.create_token(personas.other_team, "beta", "ingest,read",
                                   user=personas.users["outsider"])
    return Tokens(ingest=made["ingest"][1], read=made["read"][1], both=made["both"][1],
                  other=other, revoked=made["revoked"][1])


def bearer(token: str | None) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
