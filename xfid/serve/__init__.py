"""`xfid serve`: the team's tracker in the browser and a JSON API, one more caller of `xfid.api`.

The package's own tables (tokens, the server secret, issue links, labelled snapshots) live in
the catalog under the migration component "serve" (`xfid.serve.catalog`), so every server over
one team store shares them. Only `xfid.serve.app` and what it imports need the `serve` extra
(Starlette, uvicorn, python-multipart); tokens, links and labelled snapshots work without it.
"""
