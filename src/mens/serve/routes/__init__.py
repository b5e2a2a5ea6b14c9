"""The server's routes, one APIRouter a module; build_app (serve/app.py) includes ROUTERS in
order. A new route is a module here with its `router`, plus its line below."""

from mens.serve.routes import chat, completions, health, models

ROUTERS = (
    health.router,
    models.router,
    chat.router,
    completions.router,
)
