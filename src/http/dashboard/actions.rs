//! The operator's buttons on a job page: retry and cancel, as POST forms.
//!
//! Invariants: an action changes a job only when every check passed, in this
//! order: the viewer is the local operator or signed in; the request carries
//! an `Origin` that is this dashboard's own (a cross-site form never gets
//! further); the body is a small form whose `csrf` field equals this
//! session's form token (an HMAC under the daemon's session key of the login
//! cookie, or of the local operator's per-browser form cookie, so it is
//! worthless in another session and cannot be forged without the key); and
//! the viewer may see the job's source. A refused action changes nothing and
//! says why. Pages cannot be framed (`X-Frame-Options`, CSP), so the buttons
//! cannot be clicked through someone else's page.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::{Peer, Viewer, check_button_form, escape, page_error, viewer};
use crate::http::AppState;
use crate::queue::{Job, JobState, QueueError, Steering};

/// The buttons the job's state allows.
pub(super) fn forms(viewer: &Viewer, job: &Job) -> String {
    let action = match job.state {
        JobState::Queued | JobState::Running => "cancel",
        JobState::Failed | JobState::Cancelled | JobState::Rejected => "retry",
        _ => return String::new(),
    };
    format!(
        "<form class=actions method=post action=\"/jobs/{id}/{action}\"><input type=hidden name=csrf value=\"{token}\"><button>{label}</button></form>",
        id = job.id,
        token = escape(&viewer.csrf),
        label = if action == "cancel" {
            "Cancel job"
        } else {
            "Retry job"
        },
    )
}

pub(super) async fn act(
    State(state): State<AppState>,
    peer: Peer,
    Path((id, action)): Path<(String, String)>,
    request: Request,
) -> Response {
    let viewer = match viewer(&state, &peer, request.headers()).await {
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
    if let Err(refused) = check_button_form(&state, request, &viewer.csrf).await {
        return refused;
    }
    match state.queue.get(id).await {
        Ok(job) if viewer.may_see(&job.source) => {}
        Ok(_) | Err(QueueError::NotFound { .. }) => {
            return page_error(StatusCode::NOT_FOUND, &format!("job {id} not found"));
        }
        Err(e) => return super::internal(e),
    }
    let actor = match &viewer.principal {
        None => "dashboard: local operator".to_string(),
        Some(p) => format!("dashboard: {}", p.name),
    };
    match state.queue.steer(id, &actor, steering).await {
        Ok(job) => {
            steering.log_committed(&job, &actor);
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
