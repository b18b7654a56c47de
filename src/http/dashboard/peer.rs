//! Who owns the other end of a loopback TCP connection, read from the
//! kernel's socket tables (`/proc/net/tcp` and `/proc/net/tcp6`):
//! `SO_PEERCRED` exists only for Unix sockets, so the dashboard finds the
//! peer's own socket there, the one whose local end is the peer's address and
//! whose remote end is ours, and reads its `uid` column.
//!
//! Invariant: an owner is answered only when exactly one socket in the tables
//! has the peer's address as its local end and ours as its remote end; a
//! table that cannot be read, a row that does not parse, no such socket or
//! more than one answers `None`, and the caller then trusts nobody (fail
//! closed: the visitor must log in).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The kernel's tables of this network namespace's TCP sockets.
const TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];

/// The uid owning the socket at `peer` that is connected to `local` (our end
/// of the accepted connection), or `None` when that cannot be told for sure.
///
/// The kernel builds these tables while they are read, so a busy host can
/// show a socket twice (the same inode: one socket) or, rarely, not at all:
/// a read that finds no socket is made again, twice at most, and each table
/// is read in as few calls as it takes to hold it.
pub(super) fn owner_of_peer(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    for _ in 0..3 {
        let mut sockets: Vec<Socket> = Vec::new();
        for table in TABLES {
            match read_table(table) {
                Ok(text) => sockets.extend(owners_in(&text, peer, local)?),
                // A kernel without IPv6 has no tcp6 table; tcp is always there.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && table.ends_with('6') => {}
                Err(_) => return None,
            }
        }
        match found(sockets) {
            Found::Nothing => continue,
            Found::One(uid) => return Some(uid),
            Found::Several => return None,
        }
    }
    None
}

/// What the rows facing ours amount to.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    Nothing,
    One(u32),
    Several,
}

/// Rows of one inode are one socket shown twice.
fn found(mut sockets: Vec<Socket>) -> Found {
    sockets.sort_unstable();
    sockets.dedup_by_key(|s| s.inode);
    match sockets.as_slice() {
        [] => Found::Nothing,
        [socket] => Found::One(socket.uid),
        _ => Found::Several,
    }
}

/// One socket of a table: its owner and its inode (which tells a socket
/// shown twice from two sockets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Socket {
    inode: u64,
    uid: u32,
}

/// A table's text, read in chunks of a megabyte (each read of a table is
/// consistent only within itself).
fn read_table(path: &str) -> std::io::Result<String> {
    use std::io::Read;
    const CHUNK: usize = 1 << 20;
    let mut file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    loop {
        let start = bytes.len();
        bytes.resize(start + CHUNK, 0);
        let n = file.read(&mut bytes[start..])?;
        bytes.truncate(start + n);
        if n == 0 {
            break;
        }
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The daemon's effective uid: the only owner the dashboard trusts.
pub(super) fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Every socket of one table whose local end is `peer` and whose remote end
/// is `local`; `None` when a row does not parse.
fn owners_in(table: &str, peer: SocketAddr, local: SocketAddr) -> Option<Vec<Socket>> {
    let (peer, local) = (canonical(peer), canonical(local));
    let mut sockets = Vec::new();
    // The first line names the columns.
    for row in table.lines().skip(1).filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = row.split_whitespace().collect();
        // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
        if fields.len() < 10 {
            return None;
        }
        let (this_end, other_end) = (address(fields[1])?, address(fields[2])?);
        if this_end == peer && other_end == local {
            sockets.push(Socket {
                uid: fields[7].parse().ok()?,
                inode: fields[9].parse().ok()?,
            });
        }
    }
    Some(sockets)
}

/// IPv4-mapped IPv6 addresses as the IPv4 address they carry, so a
/// dual-stack socket's view and an IPv4 socket's row compare equal.
fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// One `ADDRESS:PORT` column: the address as the kernel prints it (each
/// 32-bit word of it as a hexadecimal number in the host's byte order), the
/// port as a hexadecimal number.
fn address(column: &str) -> Option<SocketAddr> {
    let (ip, port) = column.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(ip.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A column as the kernel prints it, for this host's byte order.
    fn column(addr: SocketAddr) -> String {
        let words: Vec<String> = match addr.ip() {
            IpAddr::V4(v4) => vec![format!("{:08X}", u32::from_ne_bytes(v4.octets()))],
            IpAddr::V6(v6) => v6
                .octets()
                .chunks_exact(4)
                .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
        };
        format!("{}:{:04X}", words.concat(), addr.port())
    }

    fn row(sl: u32, this_end: SocketAddr, other_end: SocketAddr, uid: u32) -> String {
        format!(
            "{sl:4}: {} {} 01 00000000:00000000 00:00000000 00000000 {uid:5}        0 {inode} 1 0000000000000000 20 4 30 10 -1",
            column(this_end),
            column(other_end),
            inode = 1000 + sl,
        )
    }

    const HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

    #[test]
    fn columns_parse_back_to_their_addresses() {
        for text in [
            "127.0.0.1:8080",
            "[::1]:443",
            "10.1.2.3:1",
            "[fe80::1:2]:65535",
        ] {
            let addr: SocketAddr = text.parse().unwrap();
            assert_eq!(address(&column(addr)), Some(addr), "{text}");
        }
        // The kernel's own spelling of 127.0.0.1:8080 on a little-endian host.
        if cfg!(target_endian = "little") {
            assert_eq!(
                address("0100007F:1F90"),
                Some("127.0.0.1:8080".parse().unwrap())
            );
        }
        for bad in [
            "",
            "0100007F",
            "0100007F:",
            "XYZ0007F:1F90",
            "01007F:1F90",
            "0100007F:1F9000",
        ] {
            assert_eq!(address(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_peer_socket_is_the_row_facing_ours() {
        let ours: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let listener: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let nowhere: SocketAddr = "0.0.0.0:0".parse().unwrap();
        let table = [
            HEADER.to_string(),
            row(0, listener, nowhere, 1000),
            // Our accepted socket (the daemon's uid): its local end is ours.
            row(1, ours, peer, 1000),
            // The peer's socket, owned by another user.
            row(2, peer, ours, 65534),
        ]
        .join("\n");
        let owners = |table: &str| {
            owners_in(table, peer, ours).map(|s| s.iter().map(|s| s.uid).collect::<Vec<_>>())
        };
        assert_eq!(owners(&table), Some(vec![65534]));
        // A socket of the peer's port talking to someone else is not it.
        let elsewhere: SocketAddr = "127.0.0.1:9999".parse().unwrap();
        assert_eq!(owners_in(&table, peer, elsewhere), Some(vec![]));
        // A row shown twice is one socket (its inode); two sockets are two.
        let twice = format!("{table}\n{}", row(2, peer, ours, 65534));
        assert_eq!(owners(&twice), Some(vec![65534, 65534]));
        assert_eq!(
            found(owners_in(&twice, peer, ours).unwrap()),
            Found::One(65534)
        );
        let two = format!("{table}\n{}", row(3, peer, ours, 1000));
        assert_eq!(found(owners_in(&two, peer, ours).unwrap()), Found::Several);
        assert_eq!(found(Vec::new()), Found::Nothing);
        // A row that does not parse makes the whole table unreadable.
        let broken = format!("{table}\n   3: garbage");
        assert_eq!(owners(&broken), None);
    }

    #[test]
    fn mapped_addresses_match_their_ipv4_rows() {
        // A dual-stack listener sees an IPv4 client as ::ffff:127.0.0.1.
        let ours: SocketAddr = "[::ffff:127.0.0.1]:8080".parse().unwrap();
        let peer: SocketAddr = "[::ffff:127.0.0.1]:50000".parse().unwrap();
        let table = [
            HEADER.to_string(),
            row(0, canonical(peer), canonical(ours), 0),
        ]
        .join("\n");
        let uids =
            owners_in(&table, peer, ours).map(|s| s.iter().map(|s| s.uid).collect::<Vec<_>>());
        assert_eq!(uids, Some(vec![0]));
    }

    #[test]
    fn a_real_loopback_connection_is_owned_by_this_process_uid() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let local = accepted.local_addr().unwrap();
        assert_eq!(owner_of_peer(peer, local), Some(own_uid()));
        drop(client);
        let unknown: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(owner_of_peer(unknown, local), None);
    }
}
