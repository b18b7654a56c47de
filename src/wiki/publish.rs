//! Building a wiki commit in memory and packing it: the new blobs, the edited
//! tree and a commit whose only parent is `expected_base`. The pack holds exactly
//! the objects the new tree adds over the base tree (computed from the tree
//! delta, never from whatever the in-memory overlay happens to hold) plus the
//! commit.

use gix::ObjectId;
use gix::objs::tree::EntryKind;

use super::error::WikiError;
use super::tree::tree_delta;
use super::types::Committer;

/// A page as it will be in the new tree.
#[derive(Debug, Clone)]
pub struct DesiredPage {
    pub path: String,
    pub content: Vec<u8>,
    pub blob: ObjectId,
    pub kind: EntryKind,
}

impl DesiredPage {
    pub fn new(path: String, content: Vec<u8>, kind: EntryKind) -> Result<Self, WikiError> {
        let blob =
            gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::object::Kind::Blob, &content)
                .map_err(|err| WikiError::internal("hashing a page", err))?;
        Ok(Self {
            path,
            content,
            blob,
            kind,
        })
    }
}

/// One object of the pack: id, kind and its uncompressed data.
pub struct PackObject {
    pub id: ObjectId,
    pub kind: gix::object::Kind,
    pub data: Vec<u8>,
}

/// The new commit and everything needed to publish it.
pub struct BuiltCommit {
    pub commit: ObjectId,
    pub tree: ObjectId,
    pub objects: Vec<PackObject>,
}

/// Builds the commit in an in-memory overlay of `repo`; nothing reaches disk.
pub fn build_commit(
    repo: &gix::Repository,
    base: ObjectId,
    base_tree: ObjectId,
    pages: &[DesiredPage],
    message: &str,
    identity: &Committer,
) -> Result<BuiltCommit, WikiError> {
    let overlay = repo.clone().with_object_memory();
    let internal = |err: gix::Error| WikiError::internal("building the wiki commit", err);
    let mut editor = overlay.edit_tree(base_tree).map_err(internal)?;
    for page in pages {
        let blob = overlay
            .write_blob(&page.content)
            .map_err(internal)?
            .detach();
        debug_assert_eq!(blob, page.blob);
        editor
            .upsert(page.path.as_str(), page.kind, blob)
            .map_err(internal)?;
    }
    let tree = editor.write().map_err(internal)?.detach();
    let signature = gix::actor::Signature {
        name: identity.name.as_str().into(),
        email: identity.email.as_str().into(),
        time: gix::date::Time::now_utc(),
    };
    let commit = gix::objs::Commit {
        tree,
        parents: [base].into_iter().collect(),
        author: signature.clone(),
        committer: signature,
        encoding: None,
        message: message.into(),
        extra_headers: Vec::new(),
    };
    let commit_id = overlay.write_object(&commit).map_err(internal)?.detach();
    let delta = tree_delta(&overlay, Some(base_tree), tree)?;
    let mut objects = Vec::with_capacity(delta.new_objects.len() + 1);
    for id in delta
        .new_objects
        .into_iter()
        .chain(std::iter::once(commit_id))
    {
        let object = overlay.find_object(id).map_err(internal)?;
        objects.push(PackObject {
            id,
            kind: object.kind,
            data: object.data.clone(),
        });
    }
    Ok(BuiltCommit {
        commit: commit_id,
        tree,
        objects,
    })
}

/// Encodes `objects` as a version 2 pack of undeltified entries.
pub fn encode_pack(objects: &[PackObject]) -> Result<Vec<u8>, WikiError> {
    use gix_pack::data::output;
    let mut entries = Vec::with_capacity(objects.len());
    for object in objects {
        let count = output::Count::from_data(object.id, None);
        let data = gix::objs::Data::new(&object.data, object.kind, gix::hash::Kind::Sha1);
        let entry = output::Entry::from_data(&count, &data, gix::zlib::Compression::BEST_SPEED)
            .map_err(|err| WikiError::internal("compressing a pack entry", err))?;
        entries.push(entry);
    }
    let count =
        u32::try_from(entries.len()).map_err(|err| WikiError::internal("sizing the pack", err))?;
    let mut pack = Vec::new();
    let writer = output::bytes::FromEntriesIter::new(
        std::iter::once(Ok(entries)),
        &mut pack,
        count,
        gix_pack::data::Version::V2,
        gix::hash::Kind::Sha1,
    );
    for written in writer {
        written.map_err(|err| WikiError::internal("writing the pack", err))?;
    }
    Ok(pack)
}

/// Writes the objects to `repo` on disk (after a confirmed publish, or before a
/// local ref transaction).
pub fn persist_objects(repo: &gix::Repository, objects: &[PackObject]) -> Result<(), WikiError> {
    use gix::objs::Write;
    for object in objects {
        repo.objects
            .write_buf(object.kind, &object.data)
            .map_err(|err| WikiError::internal("storing the new wiki objects", err))?;
    }
    Ok(())
}
