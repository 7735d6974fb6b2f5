"""The web app: JSON API under /api/v1 and server-rendered pages. Routes stay thin: they
authenticate, call leaderboard.service functions and render; scoring never runs here.

API: POST /api/v1/submissions (multipart: files, model, track, variant, card; Bearer token;
or, instead of files, `evaluate` = a model for the server to evaluate, with `revision` and
`profile`) -> 202 {"id", "status"[, "ignored" archive members]}; rejections are 4xx {"status":
"rejected", "errors": [{"file", "line", "field", "message"}]}. GET /api/v1/submissions/{id};
POST .../{id}/hide and .../{id}/unhide, DELETE /api/v1/submissions/{id} (owner or admin); GET
/api/v1/leaderboard/{track}?variant= and /api/v1/leaderboard/{track}.csv; GET
/api/v1/manifest/{track}?variant= (item keys, and how this instance validates); POST
/api/v1/admin/rescore and GET /api/v1/admin/audit (admin). Pages: /, /track/{name},
/submission/{id}, /chart/{track}.png, and those of leaderboard.service.result_routes
(/compare?a=&b=, /track/{name}/task/{task}, /items/{id} where the gold is public). Every
response carries a Content-Security-Policy without inline scripts. A submission without a
valid token is answered 401 before its form is read (`middleware.TokenFirst`); a form with a
field the route does not take, or one given twice or empty, is refused (`form_problems`), and
so is a query parameter an API route does not take
(`leaderboard.service.request_checks`).
"""
from __future__ import annotations

from typing import Any

from fastapi import (
    APIRouter,
    Depends,
    FastAPI,
    File,
    Form,
    Header,
    HTTPException,
    Request,
    UploadFile,
)
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from leaderboard.intake.validate import Upload
from leaderboard.service.api_models import (
    ERRORS,
    SUBMIT_ERRORS,
    Accepted,
    Deleted,
    Hidden,
    SubmissionView,
)
from leaderboard.service.api_routes import (
    admin_routes,
    admin_user_histories,
    board_routes,
    request_user,
    stored,
)
from leaderboard.service.db import Database
from leaderboard.service.entry_view import public_view
from leaderboard.service.evaluation import accept_evaluation
from leaderboard.service.middleware import (
    FORM_OVERHEAD,
    SECURITY_HEADERS,
    BodyLimit,
    HeadAsGet,
    TokenFirst,
    route_path,
)
from leaderboard.service.request_checks import (
    form_problems,
    known_query_parameters,
    parse_card,
)
from leaderboard.service.result_routes import result_routes
from leaderboard.service.schema import check_schema
from leaderboard.service.settings import load_settings
from leaderboard.service.submissions import (
    Forbidden,
    NotFound,
    QuotaExceeded,
    accept,
    delete,
    set_hidden,
)
from leaderboard.service.views import STATIC, Links, entry_ranks, home_view, render
from leaderboard.tracks import SubmissionErrors
from tasks.plumbing.errors import DataError, SumbenchError

API_PREFIX = "/api/v1"
#: the route that takes uploads (its token is checked before the form is read)
SUBMISSIONS_PATH = f"{API_PREFIX}/submissions"


def rejection(status: int, error: Exception) -> Any:
    if isinstance(error, SubmissionErrors):
        errors = error.to_list()
    elif isinstance(error, DataError):
        errors = [{"file": error.path, "line": error.line, "field": error.field,
                   "message": error.reason}]
    else:
        errors = [{"file": None, "line": None, "field": None, "message": str(error)}]
    return JSONResponse({"status": "rejected", "errors": errors}, status_code=status)


def create_app(db: str, model_root: str | None = None):
    """The FastAPI app over the database at `db` (which must be migrated: `init`);
    `model_root`: the folder submitted models may be named in (`--evaluate`)."""
    database = Database(db)
    check_schema(database)
    settings = load_settings(database)
    app = fastapi_app(database)
    app.state.database, app.state.model_root = database, model_root

    @app.middleware("http")
    async def security_headers(request, call_next):
        response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    app.include_router(page_router(database))
    app.add_exception_handler(RequestValidationError, _malformed_request)
    app.add_exception_handler(StarletteHTTPException, _page_or_api_error)
    limited = BodyLimit(app, settings.max_upload_bytes + FORM_OVERHEAD,
                        settings.max_upload_bytes)
    return HeadAsGet(TokenFirst(limited, database, {("POST", SUBMISSIONS_PATH)}))


def fastapi_app(database: Database) -> FastAPI:
    """The API's FastAPI app (its routes reach the database only when requested)."""
    app = FastAPI(title="sumbench leaderboard", version="1", docs_url=None, redoc_url=None,
                  openapi_url="/api/v1/openapi.json",
                  description="Submit predictions or models, read boards, administer.")
    app.include_router(api_router(database))
    return app


def openapi_document() -> dict:
    """The API's OpenAPI document, without a database (what /api/v1/openapi.json serves)."""
    return fastapi_app(Database("sqlite://")).openapi()


async def _page_or_api_error(request, error: StarletteHTTPException) -> Any:
    """An HTTP error of a page as a page (the API's answers stay JSON)."""
    path = route_path(request.scope)  # as the router saw it (behind a proxy prefix too)
    if _is_submission(request) and error.status_code == 400:
        return _unreadable_form(request, str(error.detail))
    if path.startswith(("/api/", "/static/")):
        return await http_exception_handler(request, error)
    page = render("error.html", Links(), status=error.status_code, message=error.detail)
    return HTMLResponse(page, status_code=error.status_code, headers=error.headers)


#: uploaded files one form may hold: Starlette's multipart parser stops there
FORM_MAX_FILES = 1000


def _unreadable_form(request, detail: str) -> Any:
    """A submission form the multipart parser refused (more parts than it takes), answered
    as a rejected submission: too many files as `max_files` words it (422), else 400."""
    if detail.startswith("Too many files"):
        limit = load_settings(request.app.state.database).max_files
        message = f"more than {limit} files in one submission" if limit <= FORM_MAX_FILES \
            else (f"more than {FORM_MAX_FILES} files in one form (the form parser's limit; "
                  f"up to {limit} fit in one archive)")
        return rejection(422, DataError(message, field="files"))
    return rejection(400, DataError(f"the submission form cannot be read: {detail}"))


async def _malformed_request(request, error: RequestValidationError) -> Any:
    """A request FastAPI cannot bind (a missing form field, a non-integer id) answered in the
    API's rejection shape, naming the field and never echoing its input."""
    errors = [{"file": None, "line": None,
               "field": ".".join(str(part) for part in item.get("loc", ())[1:]) or None,
               "message": str(item.get("msg", "invalid request"))}
              for item in error.errors()]
    if _is_submission(request):  # the form's own problems too, not only the first found
        errors += SubmissionErrors(await form_problems(request)).to_list()
    return JSONResponse({"status": "rejected", "errors": errors}, status_code=422)


def _is_submission(request) -> bool:
    return request.method == "POST" and route_path(request.scope) == SUBMISSIONS_PATH


def api_router(database: Database):
    """The JSON API under /api/v1: submissions, boards, administration."""
    router = APIRouter(prefix=API_PREFIX, dependencies=[Depends(known_query_parameters)])
    _submission_routes(router, database)
    _change_routes(router, database)
    board_routes(router, database)
    admin_routes(router, database)
    return router


def _submission_routes(router: APIRouter, database: Database) -> None:
    @router.post("/submissions", summary="Submit prediction files, or a model to evaluate",
                 status_code=202, response_model=Accepted,
                 response_model_exclude_unset=True,
                 responses={200: {"model": Accepted, "description": "sent again: the "
                                  "earlier identical submission"}, **SUBMIT_ERRORS})
    def submit(request: Request, files: list[UploadFile] = File(None),
               model: str = Form(...), track: str = Form("usb"), variant: str = Form("all"),
               card: str = Form("{}"), evaluate: str | None = Form(None),
               revision: str | None = Form(None), profile: str | None = Form(None),
               authorization: str | None = Header(None),
               problems: list[DataError] = Depends(form_problems)):
        user = request_user(database, authorization)
        if problems:
            return rejection(422, SubmissionErrors(problems))
        if evaluate is not None:
            return _accept_evaluation(database, user, request.app.state.model_root, model,
                                      track, variant, card, evaluate, revision, profile)
        return _accept_form(database, user, files, model, track, variant, card)

    @router.get("/submissions/{submission_id}", summary="One submission, as its viewer may see it",
                response_model=SubmissionView,
                response_model_exclude_unset=True, responses=ERRORS)
    def submission(submission_id: int, authorization: str | None = Header(None)):
        viewer = request_user(database, authorization, required=False)
        try:
            return public_view(database, submission_id, viewer)
        except NotFound as error:
            raise HTTPException(404, str(error)) from None


def _change_routes(router: APIRouter, database: Database) -> None:
    """Hiding, showing again and deleting a submission (its owner or an admin)."""
    def change(submission_id: int, authorization: str | None, action):
        user = request_user(database, authorization)
        try:
            return action(user)
        except NotFound as error:
            raise HTTPException(404, str(error)) from None
        except Forbidden as error:
            raise HTTPException(403, str(error)) from None

    @router.post("/submissions/{submission_id}/hide", summary="Hide a submission from its board",
                 response_model=Hidden,
                 responses=ERRORS)
    def hide(submission_id: int, authorization: str | None = Header(None)):
        return change(submission_id, authorization,
                      lambda user: set_hidden(database, submission_id, user, True))

    @router.post("/submissions/{submission_id}/unhide", summary="Show a hidden submission again",
                 response_model=Hidden,
                 responses=ERRORS)
    def unhide(submission_id: int, authorization: str | None = Header(None)):
        return change(submission_id, authorization,
                      lambda user: set_hidden(database, submission_id, user, False))

    @router.delete("/submissions/{submission_id}",
                   summary="Delete a submission (its scores stay as history)",
                   response_model=Deleted,
                   responses=ERRORS)
    def remove(submission_id: int, authorization: str | None = Header(None)):
        return change(submission_id, authorization,
                      lambda user: delete(database, submission_id, user))


def _accept_evaluation(database: Database, user, model_root: str | None, model: str,
                       track: str, variant: str, card: str, source: str,
                       revision: str | None, profile: str | None):
    """A model to evaluate: 202 queued, 200 for the same model and settings again, 429 over
    the quota, 422 rejected."""
    try:
        answer = accept_evaluation(database, load_settings(database), user, track_name=track,
                                   board=variant, model=model, card=parse_card(card),
                                   source=source, revision=revision, profile=profile,
                                   model_root=model_root)
        return JSONResponse(answer, status_code=200) if answer.get("duplicate") else answer
    except QuotaExceeded as error:
        return rejection(429, error)
    except (SumbenchError, ValueError) as error:
        return rejection(422, error)


def _accept_form(database: Database, user, files: list[UploadFile], model: str, track: str,
                 variant: str, card: str):
    """A submission form's answer: 202 accepted, 200 for the same files sent again (nothing
    new accepted: the earlier submission's answer), 429 over the quota, 422 rejected."""
    try:
        card_fields = parse_card(card)
        uploads = [Upload(f.filename or "upload", f.file.read()) for f in files]
        answer = accept(database, load_settings(database), user, track_name=track,
                        board=variant, model=model, card=card_fields, uploads=uploads)
        return JSONResponse(answer, status_code=200) if answer.get("duplicate") else answer
    except QuotaExceeded as error:
        return rejection(429, error)
    except (SumbenchError, ValueError) as error:
        return rejection(422, error)


def page_router(database: Database):
    """The HTML pages (not part of the API's schema)."""

    router = APIRouter(include_in_schema=False)

    def links() -> Links:  # every page states the instance's gold visibility
        return Links(static=False, visibility=load_settings(database).gold_visibility)

    @router.get("/", response_class=HTMLResponse)
    def home():
        return render("index.html", links(), **home_view(database))

    @router.get("/track/{track}", response_class=HTMLResponse)
    def track_page(track: str, variant: str = "all"):
        return HTMLResponse(stored(database, track, variant, "page"))

    @router.get("/chart/{track}.png")
    def chart(track: str, variant: str = "all"):
        return Response(stored(database, track, variant, "chart"), media_type="image/png")

    @router.get("/cost-chart/{track}.png")
    def cost_chart(track: str, variant: str = "all"):
        return Response(stored(database, track, variant, "cost_chart"),
                        media_type="image/png")

    @router.get("/submission/{submission_id}", response_class=HTMLResponse)
    def submission_page(submission_id: int, authorization: str | None = Header(None)):
        viewer = request_user(database, authorization, required=False)
        try:
            entry = public_view(database, submission_id, viewer)
        except NotFound as error:
            raise HTTPException(404, str(error)) from None
        return render("submission.html", links(), entry=entry,
                      place=entry_ranks(database, entry))

    @router.get("/admin/users", response_class=HTMLResponse)
    def users_page(authorization: str | None = Header(None)):
        return render("users.html", links(),
                      users=admin_user_histories(database, authorization))

    result_routes(router, database, links)
    return router
