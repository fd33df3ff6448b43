"""The JSON API under /api: each handler one `XfidStore` call, with the CLI's fields and messages.

Readers GET; writers ingest, check, compare, snapshot and act on issues; admins manage tokens.
The actor recorded for every change is the token's name. docs/serve.md lists every route.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from xfid.errors import XfidError
from xfid.serve import upload, views
from xfid.serve.served import Served, route


def dumps(value: Any) -> Response:
    return Response(json.dumps(value, indent=2, default=str), media_type="application/json")


def body(request: Request, data: bytes) -> dict[str, Any]:
    if not data.strip():
        return {}
    try:
        doc = json.loads(data)
    except ValueError as e:
        raise XfidError(f"{request.method} {request.url.path}: the body is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise XfidError(f"{request.method} {request.url.path}: the body must be a JSON object")
    return doc


def _list(v: Any) -> list[str]:
    return [] if v is None else [v] if isinstance(v, str) else [str(x) for x in v]


def routes(served: Served) -> list[Any]:
    def issues(request: Request) -> Response:
        with served.session(request, "reader", "read issues") as (api, _):
            return dumps(views.issue_rows(api, request.query_params))

    def issue(request: Request) -> Response:
        with served.session(request, "reader", "read issues") as (api, _):
            d = api.issue(request.path_params["iid"])
            d["links"] = api.links(d["id"])
            return dumps(d)

    async def act(request: Request) -> Response:
        data = body(request, await request.body())
        action = request.path_params["action"]

        def run() -> Response:
            with served.session(request, "writer", f"{action} an issue") as (api, who):
                return dumps(views.act(api, request.path_params["iid"], action, who, data))

        return await run_in_threadpool(run)

    def summaries(request: Request) -> Response:
        with served.session(request, "reader", "read issue summaries") as (api, _):
            return dumps(views.summaries(api, request.query_params.get("check")))

    def summary(request: Request) -> Response:
        with served.session(request, "reader", "read issue summaries") as (api, _):
            return dumps(api.issue_summary(request.path_params["sid"]))

    async def act_summary(request: Request) -> Response:
        data = body(request, await request.body())
        action = request.path_params["action"]

        def run() -> Response:
            with served.session(request, "writer", f"{action} a summary's issues") as (api, who):
                return dumps(views.act_summary(api, request.path_params["sid"], action, who, data))

        return await run_in_threadpool(run)

    async def link(request: Request) -> Response:
        data = body(request, await request.body())

        def run() -> Response:
            with served.session(request, "writer", "link an issue") as (api, who):
                return dumps(api.link(request.path_params["iid"], str(data.get("url", "")), actor=who.name))

        return await run_in_threadpool(run)

    async def ingest(request: Request) -> Response:
        with served.session(request, "writer", "ingest") as (api, _):  # credentials before the body
            root = api.path
        capped = upload.capped(request, served.max_upload)
        form = await capped.form(max_files=10000, max_fields=1000)
        try:
            kw = upload.fields(form)

            def run() -> Response:
                with served.session(request, "writer", "ingest", create=True) as (api, who):
                    into = upload.upload_dir(root, who.name)
                    try:
                        upload.save(form, into)
                        report = api.ingest([into], **kw)
                    except BaseException:
                        upload.discard(into)
                        raise
                    return dumps(report.to_dict())

            return await run_in_threadpool(run)
        finally:
            await form.close()

    async def check(request: Request) -> Response:
        data = body(request, await request.body())

        def run() -> Response:
            with served.session(request, "writer", "run a check") as (api, who):
                return dumps(views.check(api, who, data))

        return await run_in_threadpool(run)

    async def compare(request: Request) -> Response:
        data = body(request, await request.body())

        def run() -> Response:
            with served.session(request, "reader", "compare") as (api, _):
                return dumps(views.compare(api, data))

        return await run_in_threadpool(run)

    async def snapshot(request: Request) -> Response:
        data = body(request, await request.body())

        def run() -> Response:
            with served.session(request, "writer", "record a snapshot") as (api, who):
                return dumps(views.snapshot(api, who, data))

        return await run_in_threadpool(run)

    def checks(request: Request) -> Response:
        with served.session(request, "reader", "read checks") as (api, _):
            return dumps(views.check_list(api))

    def check_rows(request: Request) -> Response:
        with served.session(request, "reader", "read checks") as (api, _):
            return dumps(views.check_rows(api, request.path_params["cid"], request.query_params))

    def key(request: Request) -> Response:
        with served.session(request, "reader", "read a key's history") as (api, _):
            return dumps(api.history(request.path_params["key"]).to_dict())

    def tokens_list(request: Request) -> Response:
        from xfid.serve import tokens

        with served.session(request, "admin", "manage tokens") as (api, _):
            return dumps(tokens.listing(api.backend().conn))

    async def tokens_create(request: Request) -> Response:
        from xfid.serve import tokens

        data = body(request, await request.body())

        def run() -> Response:
            with served.session(request, "admin", "manage tokens") as (api, who):
                token = tokens.create(api.backend().conn, str(data.get("name", "")), str(data.get("role", "")),
                                      who.name)
                return JSONResponse({"name": data["name"], "role": data["role"], "token": token}, 201)

        return await run_in_threadpool(run)

    def tokens_revoke(request: Request) -> Response:
        from xfid.serve import tokens

        with served.session(request, "admin", "manage tokens") as (api, _):
            tokens.revoke(api.backend().conn, request.path_params["name"])
            return dumps({"revoked": request.path_params["name"]})

    return [
        route("/api/issues", issues),
        route("/api/issues/{iid}", issue),
        route("/api/issues/{iid}/link", link, ["POST"]),
        route("/api/issues/{iid}/{action:str}", act, ["POST"]),
        route("/api/summaries", summaries),
        route("/api/summaries/{sid}", summary),
        route("/api/summaries/{sid}/{action:str}", act_summary, ["POST"]),
        route("/api/ingest", ingest, ["POST"]),
        route("/api/check", check, ["POST"]),
        route("/api/checks", checks),
        route("/api/checks/{cid:int}/rows", check_rows),
        route("/api/compare", compare, ["POST"]),
        route("/api/snapshots", snapshot, ["POST"]),
        route("/api/keys/{key:path}", key),
        route("/api/tokens", tokens_list),
        route("/api/tokens", tokens_create, ["POST"]),
        route("/api/tokens/{name}", tokens_revoke, ["DELETE"]),
    ]
