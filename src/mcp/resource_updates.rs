//! `notifications/resources/updated` for the resources of
//! [`super::resources`]: a client follows a page or a path's context, and
//! hears when it changes because the wiki's tip moved.
//!
//! How a move is noticed: each process compares the tip of every wiki some
//! session follows with the tip it saw last, once every
//! `server.mcp_resource_poll_ms` (one poller per wiki for the whole
//! process, however many sessions follow it; it stops when none does).
//! Comparing tips works whichever node's job published, and also sees a
//! person's edit on the wiki; a page is announced only when its blob
//! changed, a context on every move.
//!
//! Both protocol eras: a handshake-era session asks `resources/subscribe`
//! and `resources/unsubscribe` (notifications on the session's stream); a
//! 2026-07-28 client opens `subscriptions/listen` with `resourceSubscriptions`
//! (notifications on that stream, which lasts until the client cancels it).
//!
//! Invariants:
//! - a resource of a repository the caller may not read is never followed:
//!   subscribing answers exactly as for one not configured (`resource not
//!   found`);
//! - a session follows at most [`MAX_PER_SESSION`] resources at once
//!   (subscriptions and listen streams together); one more is refused
//!   naming the limit;
//! - nothing outlives its session: a follower ends when its session (or
//!   listen stream) ends, a poller when no follower is left;
//! - a follower takes its baseline before the subscription is acknowledged,
//!   so a move right after it is never missed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::ResourceUpdatedNotificationParam;
use rmcp::service::{SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, Peer, RoleServer};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::context::Context;
use super::resources::{self, Target};

/// Most resources one session follows at once.
pub const MAX_PER_SESSION: usize = 100;

/// The tips this process watches, one poller per followed wiki.
#[derive(Default)]
pub struct Watches {
    wikis: Mutex<HashMap<String, watch::Sender<Option<String>>>>,
}

impl Watches {
    /// A receiver of `repository`'s tip, starting a poller when none runs.
    fn watch(
        self: &Arc<Self>,
        context: &Arc<Context>,
        repository: &str,
        tip: Option<String>,
    ) -> watch::Receiver<Option<String>> {
        let key = repository.to_ascii_lowercase();
        let mut wikis = self.wikis.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = wikis.get(&key) {
            return sender.subscribe();
        }
        let (sender, receiver) = watch::channel(tip);
        wikis.insert(key.clone(), sender);
        let every = context.binding.config.server.mcp_resource_poll;
        tokio::spawn(poll(
            self.clone(),
            context.clone(),
            key,
            repository.to_owned(),
            every,
        ));
        receiver
    }
}

/// Compares `repository`'s tip every `every` until nobody follows it.
async fn poll(
    watches: Arc<Watches>,
    context: Arc<Context>,
    key: String,
    repository: String,
    every: Duration,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        {
            let mut wikis = watches.wikis.lock().unwrap_or_else(|p| p.into_inner());
            if wikis.get(&key).is_none_or(|s| s.receiver_count() == 0) {
                wikis.remove(&key);
                return;
            }
        }
        let tip = match tip(&context, &repository).await {
            Ok(tip) => tip,
            Err(error) => {
                tracing::debug!(target: "teammem::mcp", source = %repository, error = %error, "a followed wiki's tip could not be read; trying again");
                continue;
            }
        };
        let wikis = watches.wikis.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sender) = wikis.get(&key) {
            sender.send_if_modified(|seen| {
                let moved = *seen != tip;
                if moved {
                    seen.clone_from(&tip);
                }
                moved
            });
        }
    }
}

/// The wiki's tip now (fetched when the wiki is remote); `None`: empty.
async fn tip(context: &Context, repository: &str) -> Result<Option<String>, String> {
    let resolved = context.resolve(repository).map_err(|e| e.message)?;
    let wiki = context
        .wiki(&resolved, false)
        .await
        .map_err(|e| e.message)?;
    Ok(wiki.snapshot().await.map_err(|e| e.message)?.sha)
}

/// The blob of `page` at `tip` (`None`: no such page, or no tip).
async fn page_blob(
    context: &Context,
    repository: &str,
    page: &str,
    tip: Option<&str>,
) -> Result<Option<String>, String> {
    let Some(tip) = tip else { return Ok(None) };
    let resolved = context.resolve(repository).map_err(|e| e.message)?;
    let wiki = context
        .wiki(&resolved, false)
        .await
        .map_err(|e| e.message)?;
    match wiki.get_page(tip, page).await {
        Ok(found) => Ok(Some(found.sha)),
        Err(error) if error.kind == crate::wiki::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error.message),
    }
}

/// What one session follows.
#[derive(Default)]
pub struct Session {
    state: Mutex<SessionState>,
    /// Cancelled when the session ends (the server instance is dropped).
    ended: CancellationToken,
}

#[derive(Default)]
struct SessionState {
    /// Handshake-era subscriptions by URI.
    subscribed: HashMap<String, CancellationToken>,
    /// Resources followed by open listen streams.
    listening: usize,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

impl Session {
    fn full(state: &SessionState, more: usize) -> Option<ErrorData> {
        let now = state.subscribed.len() + state.listening;
        (now + more > MAX_PER_SESSION).then(|| {
            ErrorData::invalid_params(
                format!(
                    "this session already follows {now} resources and may follow at most {MAX_PER_SESSION}; unsubscribe from some first"
                ),
                None,
            )
        })
    }
}

/// Where a follower's notifications go.
#[derive(Clone)]
enum Notifier {
    Session(Peer<RoleServer>),
    Listen(SubscriptionSink),
}

impl Notifier {
    async fn send(&self, uri: &str) -> bool {
        match self {
            Notifier::Session(peer) => peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                .await
                .is_ok(),
            Notifier::Listen(sink) => sink.notify_resource_updated(uri).await.is_ok(),
        }
    }
}

/// A follower ready to run: its baseline taken.
struct Follower {
    uri: String,
    target: Target,
    tip: Option<String>,
    blob: Option<String>,
    tips: watch::Receiver<Option<String>>,
}

/// Checks that the caller may read `uri` and takes its baseline (the
/// current call's scope applies, see [`super::tasks`]).
async fn prepare(
    context: &Arc<Context>,
    watches: &Arc<Watches>,
    uri: &str,
) -> Result<Follower, ErrorData> {
    let target = Target::parse(uri)?;
    let repository = target.repository().to_owned();
    if !resources::readable(context, &repository) {
        return Err(resources::not_found(uri));
    }
    let failed = |why: String| {
        ErrorData::internal_error(
            format!(
                "cannot follow {}: the wiki could not be read ({why}); try again",
                resources::shorten(uri)
            ),
            None,
        )
    };
    let tip = tip(context, &repository).await.map_err(failed)?;
    let blob = match &target {
        Target::Page { page, .. } => page_blob(context, &repository, page, tip.as_deref())
            .await
            .map_err(failed)?,
        Target::Context { .. } => None,
    };
    let tips = watches.watch(context, &repository, tip.clone());
    Ok(Follower {
        uri: uri.to_owned(),
        target,
        tip,
        blob,
        tips,
    })
}

/// Runs a follower until `stop` or until its notifications cannot be sent.
async fn follow(
    context: Arc<Context>,
    mut follower: Follower,
    notifier: Notifier,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = follower.tips.changed() => if changed.is_err() { return },
        }
        let tip = follower.tips.borrow_and_update().clone();
        if tip == follower.tip {
            continue;
        }
        follower.tip = tip;
        if let Target::Page { repository, page } = &follower.target {
            match page_blob(&context, repository, page, follower.tip.as_deref()).await {
                Ok(blob) if blob == follower.blob => continue,
                Ok(blob) => follower.blob = blob,
                // Unreadable now: announce, so the client reads and sees why.
                Err(_) => follower.blob = None,
            }
        }
        if !notifier.send(&follower.uri).await {
            return;
        }
    }
}

/// `resources/subscribe` (handshake era). Subscribing again to a followed
/// URI changes nothing.
pub async fn subscribe(
    context: &Arc<Context>,
    watches: &Arc<Watches>,
    session: &Session,
    uri: &str,
    peer: Peer<RoleServer>,
) -> Result<(), ErrorData> {
    {
        let state = session.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.subscribed.contains_key(uri) {
            return Ok(());
        }
        if let Some(error) = Session::full(&state, 1) {
            return Err(error);
        }
    }
    let follower = prepare(context, watches, uri).await?;
    let stop = session.ended.child_token();
    {
        let mut state = session.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.subscribed.contains_key(uri) {
            return Ok(());
        }
        if let Some(error) = Session::full(&state, 1) {
            return Err(error);
        }
        state.subscribed.insert(uri.to_owned(), stop.clone());
    }
    tokio::spawn(follow(
        context.clone(),
        follower,
        Notifier::Session(peer),
        stop,
    ));
    Ok(())
}

/// `resources/unsubscribe` (handshake era); an URI not followed is no error.
pub fn unsubscribe(session: &Session, uri: &str) -> Result<(), ErrorData> {
    Target::parse(uri)?;
    let mut state = session.state.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(stop) = state.subscribed.remove(uri) {
        stop.cancel();
    }
    Ok(())
}

/// `subscriptions/listen` (2026-07-28): follows the accepted resources
/// until the client cancels the stream or the session ends. Every URI is
/// checked first: one that is malformed, or not readable by the caller,
/// ends the stream with that error before anything is followed.
pub async fn listen(
    context: &Arc<Context>,
    watches: &Arc<Watches>,
    session: &Session,
    subscription: SubscriptionContext,
) -> Result<(), ErrorData> {
    let uris = subscription
        .accepted()
        .resource_subscriptions
        .clone()
        .unwrap_or_default();
    {
        let mut state = session.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(error) = Session::full(&state, uris.len()) {
            return Err(error);
        }
        state.listening += uris.len();
    }
    let stop = session.ended.child_token();
    let _release = Release {
        session,
        count: uris.len(),
        stop: stop.clone(),
    };
    let mut followers = Vec::with_capacity(uris.len());
    for uri in &uris {
        followers.push(prepare(context, watches, uri).await?);
    }
    for follower in followers {
        let notifier = Notifier::Listen(subscription.sink().clone());
        tokio::spawn(follow(context.clone(), follower, notifier, stop.clone()));
    }
    tokio::select! {
        _ = subscription.cancelled() => {}
        _ = stop.cancelled() => {}
    }
    Ok(())
}

/// Gives a listen stream's share back and stops its followers, however the
/// stream ends.
struct Release<'a> {
    session: &'a Session,
    count: usize,
    stop: CancellationToken,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.stop.cancel();
        let mut state = self.session.state.lock().unwrap_or_else(|p| p.into_inner());
        state.listening = state.listening.saturating_sub(self.count);
    }
}

/// The filter `subscriptions/listen` accepts: every requested resource
/// (each is checked, with the caller's scope, when the stream starts).
pub fn accepted(requested: &rmcp::model::SubscriptionFilter) -> rmcp::model::SubscriptionFilter {
    let mut accepted = rmcp::model::SubscriptionFilter::new();
    accepted.resource_subscriptions = requested.resource_subscriptions.clone();
    accepted
}
