"""The server-rendered pages: sign-in, overview, issues, an issue, a key, checks, the report.

Jinja2 with autoescape; every value shown goes through `textsafe.terminal` first (control and
bidi characters made visible) by the environment's `finalize`, so a hostile name is text. Forms
post back with the session's CSRF value; a GET never changes anything.
"""

from __future__ import annotations

import hmac
import tempfile
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from xfid.errors import XfidError
from xfid.report.data import FACTOR_LEGEND, issue_factor
from xfid.serve import auth, svg, tokens, views
from xfid.serve.served import Served, route
from xfid.textsafe import terminal

TEMPLATES = Path(__file__).parent / "templates"


def _finalize(v: Any) -> Any:
    if v is None:
        return "-"
    if isinstance(v, Markup) or not isinstance(v, str):
        return v
    return terminal(v)


ENV = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]), finalize=_finalize)
ENV.filters["pct"] = lambda v: "-" if v is None else f"{v * 100:+.1f}%"
ENV.filters["g"] = lambda v: "-" if v is None else f"{v:.6g}" if isinstance(v, (int, float)) else v
ENV.filters["factor"] = issue_factor  # |error| / tolerance, without the rank severity adds for the kind
ENV.globals["factor_legend"] = FACTOR_LEGEND


def render(request: Request, name: str, ctx: dict[str, Any], status: int = 200) -> HTMLResponse:
    served: Served = request.app.state.served
    who = getattr(request.state, "who", None)
    page = ENV.get_template(name).render(request=request, who=who, csrf=served.csrf(request), **ctx)
    return HTMLResponse(page, status)


def _safe_next(target: str | None) -> str:
    return target if target and target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


def routes(served: Served) -> list[Any]:
    def login_page(request: Request) -> Response:
        nonce = auth.new_login_nonce()
        resp = render(request, "login.html", {"nonce": nonce, "next": _safe_next(request.query_params.get("next"))})
        resp.set_cookie(auth.LOGIN_COOKIE, nonce, httponly=True, samesite="strict", path="/login",
                        secure=request.url.scheme == "https")
        return resp

    async def login(request: Request) -> Response:
        form = await request.form()
        nonce = request.cookies.get(auth.LOGIN_COOKIE, "")
        if not nonce or not hmac.compare_digest(nonce, str(form.get("nonce", ""))):
            raise auth.AuthError("the sign-in form expired or came from another site; open /login again", 403)

        def run() -> Response:
            api = served.open()
            try:
                conn = api.backend().conn
                key = served.key(conn)
                who = tokens.verify(conn, key, str(form.get("token", "")).strip())
                if who is None:
                    raise auth.AuthError("unknown or revoked token (ask an admin: `xfid token create NAME --role ROLE`)")
                resp = RedirectResponse(_safe_next(str(form.get("next", "/"))), 303)
                resp.set_cookie(auth.SESSION_COOKIE, auth.session_value(key, who), max_age=auth.SESSION_S,
                                httponly=True, samesite="strict", secure=request.url.scheme == "https")
                resp.delete_cookie(auth.LOGIN_COOKIE, path="/login")
                return resp
            finally:
                api.close()

        return await run_in_threadpool(run)

    async def logout(request: Request) -> Response:
        await _form(request, served)
        resp = RedirectResponse("/login", 303)
        resp.delete_cookie(auth.SESSION_COOKIE)
        return resp

    def overview(request: Request) -> Response:
        with served.session(request, "reader", "see the overview") as (api, _):
            o = views.overview(api)
            plot = svg.lines(o["health"], y_label="share of keys within tolerance", y_min=0.0, y_max=1.0,
                             title="pair health over checks")
            return render(request, "overview.html", {"o": o, "plot": plot})

    def issues(request: Request) -> Response:
        with served.session(request, "reader", "list issues") as (api, _):
            rows = views.issue_rows(api, request.query_params)
            all_rows = api.issue_list()
            return render(request, "issues.html", {
                "rows": rows, "q": request.query_params, "states": ("open", "acknowledged", "resolved", "reopened",
                                                                    "waived", "invalid", "duplicate",
                                                                    "downstream", "active"),
                "kinds": sorted({r["kind"] for r in all_rows}), "targets": sorted({str(r["target"]) for r in all_rows})})

    def issue(request: Request) -> Response:
        with served.session(request, "reader", "see an issue") as (api, _):
            d = api.issue(request.path_params["iid"])
            series = {"rel_error": [(o["check_id"], o["rel_error"]) for o in d["observations"]
                                    if o["rel_error"] is not None]}
            plot = svg.lines(series, y_label="relative error", title="error at each observation")
            return render(request, "issue.html", {"d": d, "links": api.links(d["id"]),
                                                  "plot": plot, "flash": request.query_params.get("done")})

    async def act(request: Request) -> Response:
        form = await _form(request, served)
        action = str(form.get("action", ""))
        fields = _action_fields(form, action)

        def run() -> Response:
            with served.session(request, "writer", f"{action} an issue") as (api, who):
                d = views.act(api, request.path_params["iid"], action, who, fields)
                return RedirectResponse(f"/issues/{d['id']}?done={action}", 303)

        return await run_in_threadpool(run)

    def summaries_page(request: Request) -> Response:
        with served.session(request, "reader", "see issue summaries") as (api, _):
            rows = views.summaries(api, request.query_params.get("check"))
            return render(request, "summaries.html", {"rows": rows, "check": request.query_params.get("check"),
                                                      "flash": request.query_params.get("done")})

    async def act_summary(request: Request) -> Response:
        form = await _form(request, served)
        action = str(form.get("action", ""))
        fields = _action_fields(form, action)

        def run() -> Response:
            with served.session(request, "writer", f"{action} a summary's issues") as (api, who):
                d = views.act_summary(api, request.path_params["sid"], action, who, fields)
                cid = d["summary"].split("-")[1]
                return RedirectResponse(f"/summaries?check={cid}&done={action}+{d['summary']}", 303)

        return await run_in_threadpool(run)

    async def link(request: Request) -> Response:
        form = await _form(request, served)

        def run() -> Response:
            with served.session(request, "writer", "link an issue") as (api, who):
                iid = api.link(request.path_params["iid"], str(form.get("url", "")), actor=who.name)["id"]
                return RedirectResponse(f"/issues/{iid}?done=link", 303)

        return await run_in_threadpool(run)

    def key(request: Request) -> Response:
        with served.session(request, "reader", "see a key") as (api, _):
            h = api.history(request.path_params["key"])
            pts = [(p["check_id"], p["rel_error"]) for p in h.series if p["rel_error"] is not None]
            marks = [pts[c.index][0] for c in h.change_points if c.index < len(pts)]
            plot = svg.lines({"rel_error": pts}, y_label="relative error", marks=marks, title="error at every check")
            starts = {pts[c.index][0] for c in h.change_points if c.index < len(pts)}
            return render(request, "key.html", {"h": h, "plot": plot, "starts": starts})

    def checks(request: Request) -> Response:
        with served.session(request, "reader", "list checks") as (api, _):
            return render(request, "checks.html", {"checks": views.check_list(api)})

    def check(request: Request) -> Response:
        with served.session(request, "reader", "see a check") as (api, _):
            cid = request.path_params["cid"]
            page = views.check_rows(api, cid, request.query_params)
            meta = next((c for c in views.check_list(api) if c["id"] == cid), None)
            return render(request, "check.html", {"page": page, "meta": meta,
                                                  "columns": list(page["rows"][0]) if page["rows"] else []})

    def report(request: Request) -> Response:
        with served.session(request, "reader", "download a report") as (api, _):
            fmt = request.query_params.get("format", "html")
            if fmt not in ("html", "pdf"):
                raise XfidError(f"report format {fmt!r}: html or pdf")
            period = request.query_params.get("period") or None
            with tempfile.TemporaryDirectory(prefix="xfid-serve-report-") as d:
                out = Path(d) / f"report.{fmt}"
                res = api.report(period, out, html=fmt == "html")
                name = f"xfid-{(period or 'last-week').replace('..', '_')}.{fmt}"
                data = res.path.read_bytes()
            media = "text/html; charset=utf-8" if fmt == "html" else "application/pdf"
            return Response(data, media_type=media,
                            headers={"Content-Disposition": f'attachment; filename="{_ascii(name)}"'})

    def report_page(request: Request) -> Response:
        with served.session(request, "reader", "download a report"):
            return render(request, "report.html", {})

    return [
        route("/login", login_page), route("/login", login, ["POST"]), route("/logout", logout, ["POST"]),
        route("/", overview), route("/issues", issues), route("/issues/{iid}", issue),
        route("/issues/{iid}/act", act, ["POST"]), route("/issues/{iid}/link", link, ["POST"]),
        route("/summaries", summaries_page), route("/summaries/{sid}/act", act_summary, ["POST"]),
        route("/keys/{key:path}", key), route("/checks", checks), route("/checks/{cid:int}", check),
        route("/report", report_page), route("/report/download", report),
        route("/favicon.ico", lambda r: RedirectResponse("/static/favicon.svg", 301)),
    ]


def _ascii(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


async def _form(request: Request, served: Served) -> Any:
    """The posted form, after the CSRF check for a cookie session (a bearer token needs none)."""
    form = await request.form()
    if not request.headers.get("authorization"):
        session = request.cookies.get(auth.SESSION_COOKIE, "")
        expected = served.csrf(request)
        if not session or not hmac.compare_digest(expected, str(form.get("csrf", ""))):
            raise auth.AuthError("the form's CSRF value is missing or wrong: reload the page and submit it again", 403)
    return form


def _action_fields(form: Any, action: str) -> dict[str, Any]:
    """The filled-in form fields an action takes (views.ACTIONS); empty ones left out."""
    return {k: form.get(k) for k in views.ACTIONS.get(action, ()) if form.get(k) not in (None, "")}
