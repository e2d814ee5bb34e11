//! A minimal DNS client (one A query over UDP), so the host can ask the
//! cluster's DNS Service whether it answers — the end-to-end check that
//! CoreDNS runs, kube-proxy serves its ClusterIP and the host route leads
//! there.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::Duration;

/// The query's id (a constant: one query per socket).
const QUERY_ID: u16 = 0x0d75;

/// Encodes an A query (recursion desired) for `name`.
fn encode_query(name: &str) -> Vec<u8> {
    let mut packet = Vec::with_capacity(name.len() + 18);
    packet.extend_from_slice(&QUERY_ID.to_be_bytes());
    packet.extend_from_slice(&[0x01, 0x00]); // RD
    packet.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]); // 1 question
    for label in name.trim_end_matches('.').split('.') {
        packet.push(label.len().min(63) as u8);
        packet.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    packet.push(0);
    packet.extend_from_slice(&[0, 1, 0, 1]); // type A, class IN
    packet
}

/// What an answer's header says: its response code and answer count.
fn decode_answer(packet: &[u8]) -> Result<(u8, u16), String> {
    if packet.len() < 12 {
        return Err(format!("a {}-byte answer", packet.len()));
    }
    if packet[..2] != QUERY_ID.to_be_bytes() || packet[2] & 0x80 == 0 {
        return Err("not an answer to the query".to_owned());
    }
    Ok((packet[3] & 0x0f, u16::from_be_bytes([packet[6], packet[7]])))
}

/// Asks `server` (port 53) for `name`'s A record; `Ok` when it answers
/// NOERROR with at least one record.
pub(crate) fn resolves(server: Ipv4Addr, name: &str, timeout: Duration) -> Result<(), String> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    socket
        .connect(SocketAddr::from((server, 53)))
        .map_err(|e| e.to_string())?;
    socket
        .send(&encode_query(name))
        .map_err(|e| format!("sending a query to {server}: {e}"))?;
    let mut buffer = [0u8; 512];
    let read = socket
        .recv(&mut buffer)
        .map_err(|e| format!("no answer from {server}: {e}"))?;
    match decode_answer(&buffer[..read])? {
        (0, answers) if answers > 0 => Ok(()),
        (rcode, answers) => Err(format!(
            "{server} answered rcode {rcode} with {answers} records for {name}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_names_its_question_in_labels() {
        let packet = encode_query("kubernetes.default.svc.cluster.local.");
        assert_eq!(&packet[..4], &[0x0d, 0x75, 0x01, 0x00]);
        assert_eq!(&packet[12..25], b"\x0akubernetes\x07d");
        assert_eq!(&packet[packet.len() - 5..], &[0, 0, 1, 0, 1]);
    }

    #[test]
    fn answers_are_checked_for_id_code_and_count() {
        let mut answer = encode_query("a.b");
        answer[2] |= 0x80;
        answer[7] = 1;
        assert_eq!(decode_answer(&answer), Ok((0, 1)));
        answer[3] |= 3; // NXDOMAIN
        assert_eq!(decode_answer(&answer), Ok((3, 1)));
        answer[0] = 0;
        assert!(decode_answer(&answer).is_err());
        assert!(decode_answer(&[0; 4]).is_err());
    }
}
