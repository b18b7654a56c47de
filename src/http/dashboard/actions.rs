//! The operator's buttons on a job page: retry and cancel, as POST forms.
//!
//! Invariants: an action changes a job only when every check passed, in this
//! order: the viewer is the local operator or signed in; the request carries
//! an `Origin` that is this dashboard's own (a cross-site form never gets
//! further); the body is a small form whose `csrf` field equals this
//! session's token (an HMAC of the session cookie under the daemon's session
//! key, so it is worthless in another session and cannot be forged without
//! the key); and the viewer may see the job's source. A refused action
//! changes nothing and says why.

use std::net::SocketAddr;

use axum::Form;
use axum::body::Body;
use axum::extract::{ConnectInfo, FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::{Viewer, escape, is_form, is_own_origin, page_error, session_cookie, viewer};
use crate::http::AppState;
use crate::queue::{Job, JobState, QueueError, Steering};

/// The most an action form may hold (one hex token and its field name).
const MAX_ACTION_BYTES: usize = 1024;

/// This session's form token: HMAC-SHA256 of the session cookie (or of the
/// local operator's marker) under the session key, hex.
pub(super) fn csrf_token(state: &AppState, headers: &HeaderMap) -> String {
    let session = session_cookie(headers).unwrap_or("local operator");
    let mut mac = Hmac::<Sha256>::new_from_slice(&state.session_key[..]).expect("any key length");
    mac.update(b"csrf:");
    mac.update(session.as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

/// The buttons the job's state allows.
pub(super) fn forms(state: &AppState, headers: &HeaderMap, job: &Job) -> String {
    let action = match job.state {
        JobState::Queued | JobState::Running => "cancel",
        JobState::Failed | JobState::Cancelled | JobState::Rejected => "retry",
        _ => return String::new(),
    };
    format!(
        "<form class=actions method=post action=\"/jobs/{id}/{action}\"><input type=hidden name=csrf value=\"{token}\"><button>{label}</button></form>",
        id = job.id,
        token = escape(&csrf_token(state, headers)),
        label = if action == "cancel" {
            "Cancel job"
        } else {
            "Retry job"
        },
    )
}

#[derive(Deserialize)]
struct ActionForm {
    csrf: String,
}

pub(super) async fn act(
    State(state): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path((id, action)): Path<(String, String)>,
    request: Request,
) -> Response {
    let headers = request.headers().clone();
    let viewer = match viewer(&state, peer, &headers).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let steering = match action.as_str() {
        "retry" => Steering::Retry,
        "cancel" => Steering::Cancel,
        _ => return page_error(StatusCode::NOT_FOUND, "the actions are retry and cancel"),
    };
    let Some(id) = id.parse::<i64>().ok().filter(|n| *n > 0) else {
        return page_error(StatusCode::BAD_REQUEST, "a job id is a positive number");
    };
    if is_own_origin(&state, &headers) != Some(true) {
        return page_error(
            StatusCode::FORBIDDEN,
            "use the buttons on this dashboard's own job page (the request's Origin is missing or foreign)",
        );
    }
    if !is_form(&headers) {
        return page_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the action as a form (application/x-www-form-urlencoded)",
        );
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_ACTION_BYTES).await else {
        return page_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the action form is too large",
        );
    };
    let form =
        match Form::<ActionForm>::from_request(Request::from_parts(parts, Body::from(body)), &())
            .await
        {
            Ok(Form(form)) => form,
            Err(_) => {
                return page_error(
                    StatusCode::BAD_REQUEST,
                    "the action form needs its csrf field",
                );
            }
        };
    let expected = csrf_token(&state, &headers);
    if !bool::from(form.csrf.as_bytes().ct_eq(expected.as_bytes())) {
        return page_error(
            StatusCode::FORBIDDEN,
            "the form's token is not this session's; reload the job page and press the button again",
        );
    }
    match state.queue.get(id).await {
        Ok(job) if viewer.may_see(&job.source) => {}
        Ok(_) | Err(QueueError::NotFound { .. }) => {
            return page_error(StatusCode::NOT_FOUND, &format!("job {id} not found"));
        }
        Err(e) => return super::internal(e),
    }
    let actor = match &viewer {
        Viewer::Local => "dashboard: local operator".to_string(),
        Viewer::Token(p) => format!("dashboard: {}", p.name),
    };
    match state.queue.steer(id, &actor, steering).await {
        Ok(_) => {
            if matches!(steering, Steering::Retry) {
                state.wake_workers.notify_one();
            }
            Redirect::to(&format!("/jobs/{id}")).into_response()
        }
        Err(e @ QueueError::InvalidTransition { .. }) => {
            page_error(StatusCode::CONFLICT, &e.to_string())
        }
        Err(QueueError::NotFound { .. }) => {
            page_error(StatusCode::NOT_FOUND, &format!("job {id} not found"))
        }
        Err(e) => super::internal(e),
    }
}
