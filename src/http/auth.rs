//! Bearer-token authentication for the maintainer routes.
//!
//! `Caller` is an extractor: a handler that takes one cannot run for an
//! unauthenticated request. Tokens are checked against the hashed
//! `api_tokens`; the answer to a bad token never says why it was bad. A
//! caller past its token's request rate (`[limits]`, see `limits.rs`) is
//! answered `429` before the handler runs.

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::{ApiError, AppState};
use crate::tokens::{self, Principal};

/// An authenticated caller.
#[derive(Debug, Clone)]
pub struct Caller(pub Principal);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let value = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::unauthorized(
                    "missing Authorization header; send `Authorization: Bearer <token>` (create one with `teammem tokens create`)",
                )
            })?
            .to_str()
            .map_err(|_| ApiError::unauthorized("the Authorization header is not valid text"))?;
        let token = tokens::bearer_token(value)
            .ok_or_else(|| ApiError::unauthorized("expected `Authorization: Bearer <token>`"))?;
        // A token flooding past its rate is refused before it is looked up.
        state.limits.refuse_early(Some(value))?;
        match tokens::verify(&state.pool, token).await {
            Ok(Some(principal)) => {
                let key = super::limits::principal_key(&principal);
                state.limits.remember(Some(value), &key);
                state.limits.check_rate(&key)?;
                Ok(Caller(principal))
            }
            Ok(None) => Err(ApiError::unauthorized(
                "the token is not valid or was revoked",
            )),
            Err(e) if crate::db::is_unavailable(&e) => Err(ApiError::database_unavailable(&e)),
            Err(e) => Err(ApiError::internal("token lookup failed", &e)),
        }
    }
}
