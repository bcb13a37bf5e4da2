"""User endpoints: sign-in and sign-out, the current user, and the accounts (Determined's
`/api/v1/auth/*`, `/api/v1/me`, `/api/v1/users*`; docs/team.md)."""

from __future__ import annotations

from master_lite import errors
from master_lite.api._base import ApiError, ApiHandlerMixin
from master_lite.api._declarations import Operation, Owner, Param, PathParam, Reads, Route
from master_lite.api._openapi import BOOLEAN, EMPTY, INTEGER, STRING, array, obj, ref

USER_ID = PathParam("user_id", r"[0-9]+", INTEGER, int, "user id")
USERNAME = PathParam("username", r"[^/]+", STRING, str, "username")
USER_ANSWER = obj(["user"], user=ref("User"))
# Making accounts and setting passwords mints credentials: a new account's session token is the
# master's own and skips a hosting Jupyter server's Authorizer, so it could do what the caller
# may not (an operator without "execute" would sign in as an admin it made and attach to
# kernels). So these need the Authorizer's highest action, as running code does.
MANAGES_ACCOUNTS = "execute"
PASSWORD = {**STRING, "maxLength": 1024}
IS_HASHED = {
    **BOOLEAN,
    "description": "the password is Determined's client-side salted hash (its clients send that)",
}


class LoginHandler(ApiHandlerMixin):
    async def post(self) -> None:
        body = self.body
        try:
            answer = self.master.users.login(
                body["username"],
                body["password"],
                is_hashed=bool(body.get("isHashed")),
                address=self._client_address(),
            )
        except errors.TooManyRequests as exc:
            self.set_header("Retry-After", str(exc.retry_after))
            self.send_json({"message": exc.message}, status=429)
            return
        self.send_json(answer)

    def _client_address(self) -> str:
        """Who is signing in, for the per-address limit: behind the JupyterHub's proxy (a Hub
        service) the address the proxy saw, the last X-Forwarded-For entry (earlier ones are
        the client's to write); otherwise the connection's."""
        if getattr(self.master, "hub", None) is not None:
            forwarded = self.request.headers.get("X-Forwarded-For", "").split(",")[-1].strip()
            if forwarded:
                return forwarded
        return str(self.request.remote_ip)


class LogoutHandler(ApiHandlerMixin):
    async def post(self) -> None:
        self.master.users.logout(self.request_token())
        self.send_json({})


class MeHandler(ApiHandlerMixin):
    async def get(self) -> None:
        self.send_json(self.master.users.me(self.principal))


class UsersHandler(ApiHandlerMixin):
    async def get(self) -> None:
        users = self.master.users.list_users(
            name=self.args["name"], active=self.args["active"], admin=self.args["admin"]
        )
        self.send_json(
            {
                "users": users,
                "pagination": {"offset": 0, "limit": len(users), "total": len(users)},
            }
        )

    async def post(self) -> None:
        user = self.body["user"]
        answer = self.master.users.create_user(
            user["username"],
            password=self.body.get("password"),
            admin=bool(user.get("admin")),
            display_name=user.get("displayName") or "",
            is_hashed=bool(self.body.get("isHashed")),
        )
        self.send_json(answer)


class UserHandler(ApiHandlerMixin):
    async def get(self, user_id: int) -> None:
        self.send_json(self.master.users.get_user(user_id))

    async def patch(self, user_id: int) -> None:
        self.send_json(self.master.users.patch_user(self.principal, user_id, self.body))


class UserByNameHandler(ApiHandlerMixin):
    async def get(self, username: str) -> None:
        self.send_json(self.master.users.get_user_by_name(username))


class UserPasswordHandler(ApiHandlerMixin):
    async def post(self, user_id: int) -> None:
        # Determined's body is the password itself (a JSON string); {"password": ...} too.
        body = self.body
        password = body.get("password") if isinstance(body, dict) else body
        if not isinstance(password, str):
            raise ApiError(400, "body: send the new password as a JSON string")
        is_hashed = bool(body.get("isHashed")) if isinstance(body, dict) else False
        self.send_json(self.master.users.set_password(user_id, password, is_hashed=is_hashed))


USER_ROUTES: tuple[Route, ...] = (
    Route(
        "/auth/login",
        LoginHandler,
        {
            "post": Operation(
                "Sign in with a username and password: a session token",
                obj(["token", "user"], token=STRING, user=ref("User")),
                auth=False,
                signs_in=True,
                request=obj(
                    ["username", "password"],
                    username=STRING,
                    password=PASSWORD,
                    isHashed=IS_HASHED,
                ),
                description="401 for a wrong username or password, or a deactivated user; "
                "429 (with Retry-After) after 10 wrong ones in 5 minutes for that username or "
                "from that client address; a session lasts session_lifetime_hours (7 days)",
            )
        },
    ),
    Route(
        "/auth/logout",
        LogoutHandler,
        {"post": Operation("End this session (its token no longer works)", EMPTY)},
    ),
    Route(
        "/auth/user",
        MeHandler,
        {
            "get": Operation(
                "The signed-in user (Determined's CurrentUser)", USER_ANSWER, reads=Reads.ANYONE
            )
        },
    ),
    Route(
        "/me", MeHandler, {"get": Operation("The signed-in user", USER_ANSWER, reads=Reads.ANYONE)}
    ),
    Route(
        "/users",
        UsersHandler,
        {
            "get": Operation(
                "Every user",
                obj(["users"], users=array(ref("User")), pagination=obj()),
                reads=Reads.ANYONE,  # as in Determined, anyone signed in lists the users
                query=(
                    Param("name", "string", "only users whose name contains this"),
                    Param("active", "boolean", "only (in)active users"),
                    Param("admin", "boolean", "only (non-)admins"),
                ),
            ),
            "post": Operation(
                "Create a user (admins only)",
                USER_ANSWER,
                request=obj(
                    ["user"],
                    user=obj(
                        ["username"],
                        username=STRING,
                        admin=BOOLEAN,
                        active=BOOLEAN,
                        displayName=STRING,
                    ),
                    password={
                        **PASSWORD,
                        "description": "empty or absent: no sign-in until one is set",
                    },
                    isHashed=IS_HASHED,
                ),
                owner=Owner.ADMIN,
                verb="create users",
                auth_action=MANAGES_ACCOUNTS,
                description="409 when the username is taken",
            ),
        },
    ),
    Route(
        "/users/{user_id}",
        UserHandler,
        {
            "get": Operation("A user", USER_ANSWER, reads=Reads.ANYONE),
            "patch": Operation(
                "Change a user: displayName (the user or an admin); active, admin, username, "
                "password (an admin)",
                USER_ANSWER,
                request=obj(
                    displayName=STRING,
                    active=BOOLEAN,
                    admin=BOOLEAN,
                    username=STRING,
                    password=PASSWORD,
                    isHashed=IS_HASHED,
                ),
                owner=Owner.USER,
                verb="change",
                auth_action=MANAGES_ACCOUNTS,
                description="the owner account (user 1) stays active and an admin",
            ),
        },
        (USER_ID,),
    ),
    Route(
        "/users/{username}/by-username",
        UserByNameHandler,
        {"get": Operation("A user by name", USER_ANSWER, reads=Reads.ANYONE)},
        (USERNAME,),
    ),
    Route(
        "/users/{user_id}/password",
        UserPasswordHandler,
        {
            "post": Operation(
                "Set a user's password (the user or an admin)",
                USER_ANSWER,
                request={
                    "oneOf": [PASSWORD, obj(["password"], password=PASSWORD, isHashed=IS_HASHED)],
                    "description": "the new password as a JSON string (Determined's body), "
                    "or {password}",
                },
                owner=Owner.USER,
                verb="set the password of",
                auth_action=MANAGES_ACCOUNTS,
            )
        },
        (USER_ID,),
    ),
)

__all__ = ["USER_ROUTES"]
