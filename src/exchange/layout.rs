//! Finding a communicator's node layout on its first barrier, when it
//! spans nodes: every rank sends its host name and settings to rank 0,
//! which answers each with its node's ranks (a leader also gets the
//! leaders it talks to) and the settings every rank adopts (`words`): rank 0's,
//! with `auto` resolved by the most populous node. Rank 0 hears from all
//! before anyone hears back, so the exchange is itself a barrier. What rank
//! 0 sends grows with the ranks per node, not with the communicator's size
//! squared: (n-1)(n+4) words when every rank got every rank's node id. A
//! leader gets only the leaders it talks to (`inter::partners`), so that
//! with one rank per node and dissemination between nodes a rank gets
//! O(log n) leaders, not n.
//!
//! A rank of another protocol version gets the answer of version 2, which
//! every version reads: every rank's node id, then `TAIL_WORDS`.

use std::ffi::c_int;

use crate::exchange::lookout::Lookout;
use crate::exchange::words::{self, Greeting, Settings, SETTINGS_WORDS};
use crate::exchange::Agreed;
use crate::barrier::inter::{self, InterAlgorithm};
use crate::layout::{self, Layout, NO_LEADER};
use crate::ompi::report::{self, Topic};
use crate::p2p::{Flight, P2p, Slot, ERROR};
use crate::settings::Algorithm;

/// Bytes of a host name that count (longer names are cut).
const NAME_WORDS: usize = 8;

/// A host name as message words.
fn name_words(host: &str) -> [u64; NAME_WORDS] {
    let mut b = [0u8; NAME_WORDS * 8];
    let len = host.len().min(b.len());
    b[..len].copy_from_slice(&host.as_bytes()[..len]);
    std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()))
}

/// A rank's first message: hello, host name, settings.
const HELLO_WORDS: usize = 1 + NAME_WORDS + SETTINGS_WORDS;
/// Rank 0's settings as it answers: hello, rank 0's local algorithm, the
/// agreed leaders' algorithm, and 1 if the ranks fall back together
/// (protocol versions). First in an answer of our version, after the node
/// ids in one of version 2.
const TAIL_WORDS: usize = 4;

/// An answer of our version: the tail, then our node's index, the number
/// of nodes, the ranks on the most populous node, the count of our node's
/// ranks and those ranks, the count of leaders sent and the leaders, each
/// as its node's index above its rank (none to a rank that does not lead;
/// to a leader those it talks to, `leaders_sent`).
const HEAD_WORDS: usize = TAIL_WORDS + 4;

/// Room for either answer to a communicator of `n` ranks: a node's ranks
/// and the leaders overlap in one rank at most, so they are at most n + 1.
fn answer_room(n: usize) -> usize {
    (n + TAIL_WORDS).max(HEAD_WORDS + (n + 1) + 1)
}

/// The nodes whose leaders rank 0 sends the leader of `node`: those it
/// talks to under the agreed leaders' algorithm (`inter::partners`), or
/// none if the ranks fall back (the linear barrier over the whole
/// communicator runs then, without leaders).
fn leaders_sent(tail: &[u64], node: usize, nodes: usize) -> Option<Vec<usize>> {
    let inter = Settings::from_words(tail.get(1..3)?)?.inter?;
    Some(match tail.get(3)? {
        0 => inter::partners(inter, node, nodes),
        _ => Vec::new(),
    })
}

/// Rank `rank`'s answer of our version: `tail`, then its place among
/// `groups` (each node's ranks, ascending, nodes in order of their lowest
/// rank; `largest` ranks on the most populous), `node` its node's index.
fn answer(tail: [u64; TAIL_WORDS], groups: &[Vec<c_int>], largest: usize, node: usize, rank: c_int) -> Vec<u64> {
    let local = &groups[node];
    let leader = local.first() == Some(&rank);
    let mut w = tail.to_vec();
    w.extend([node as u64, groups.len() as u64, largest as u64, local.len() as u64]);
    w.extend(local.iter().map(|&r| r as u64));
    match leader.then(|| leaders_sent(&tail, node, groups.len())).flatten() {
        Some(sent) => {
            w.push(sent.len() as u64);
            w.extend(sent.iter().map(|&j| ((j as u64) << 32) | groups[j][0] as u64));
        }
        None => w.push(0),
    }
    w
}

/// Reads an answer of our version (`w`, zero-padded) as rank `rank`: its
/// layout, or None if the words do not hold one.
fn read_answer(w: &[u64], rank: c_int) -> Option<Layout> {
    let head = w.get(TAIL_WORDS..HEAD_WORDS)?;
    let (node, nodes, largest, k) = (head[0] as usize, head[1] as usize, head[2] as usize, head[3] as usize);
    let local: Vec<c_int> = w.get(HEAD_WORDS..HEAD_WORDS.checked_add(k)?)?.iter().map(|&r| r as c_int).collect();
    let m = *w.get(HEAD_WORDS + k)? as usize;
    let sent = w.get(HEAD_WORDS + k + 1..(HEAD_WORDS + k + 1).checked_add(m)?)?;
    let me = local.iter().position(|&r| r == rank)?;
    // A communicator has at most as many nodes and ranks as the answer has
    // room for (`answer_room`): checked before anything is sized by them.
    if node >= nodes || k > largest || nodes > w.len() {
        return None;
    }
    let mut leaders = Vec::new();
    if me == 0 {
        // Exactly the leaders it talks to, ours (unless the ranks fall
        // back: none) at our node's place; each a rank.
        let want = leaders_sent(w, node, nodes)?;
        let nodes_sent: Vec<usize> = sent.iter().map(|&x| (x >> 32) as usize).collect();
        if nodes_sent != want {
            return None;
        }
        leaders = vec![NO_LEADER; nodes];
        for (&j, &x) in nodes_sent.iter().zip(sent) {
            leaders[j] = c_int::try_from(x & 0xffff_ffff).ok().filter(|&r| (r as usize) < w.len())?;
        }
        if !want.is_empty() && leaders[node] != local[0] {
            return None;
        }
    } else if m != 0 {
        return None;
    }
    Some(Layout { local, me, leaders, nodes, node, largest })
}

/// One rank's part of the layout exchange, advanced without blocking.
pub struct LayoutExchange<P: P2p> {
    rank: c_int,
    settings: Settings,
    /// Whether the ranks of a node of that many ranks keep their cores
    /// while they wait: how rank 0 resolves `auto` (`Algorithm::for_node`).
    own_cores: Box<dyn Fn(usize) -> bool + Send>,
    flight: Flight<P>,
    /// Rank 0: every rank's first message (ours in slot 0), once arrived.
    names: Vec<[u64; HELLO_WORDS]>,
    /// Rank 0: where the others' first messages arrive (rank q at q-1).
    slots: Vec<Slot>,
    /// Others: where rank 0's answer arrives.
    answer: Option<Slot>,
    /// Rank 0's answer to us (rank 0: its own).
    reply: Vec<u64>,
    /// Ranks in the communicator.
    size: usize,
    /// Rank 0 has sent the ids.
    answered: bool,
    disagreement: Option<String>,
    fallback: Option<String>,
    /// Watches for peers that will never take part.
    lookout: Lookout,
}

impl<P: P2p> LayoutExchange<P> {
    /// Starts the exchange as `rank` of `size` on `p2p`'s communicator.
    pub fn start(
        p2p: P,
        rank: c_int,
        size: c_int,
        settings: Settings,
        own_cores: impl Fn(usize) -> bool + Send + 'static,
        lookout: Lookout,
    ) -> Result<LayoutExchange<P>, c_int> {
        let n = size as usize;
        let mut mine = [0u64; HELLO_WORDS];
        mine[0] = words::hello();
        mine[1..1 + NAME_WORDS].copy_from_slice(&name_words(&p2p.host()));
        mine[1 + NAME_WORDS..].copy_from_slice(&settings.words());
        let mut x = LayoutExchange {
            rank,
            settings,
            own_cores: Box::new(own_cores),
            flight: Flight::new(p2p),
            names: vec![mine],
            slots: Vec::new(),
            answer: None,
            reply: Vec::new(),
            size: n,
            answered: false,
            disagreement: None,
            fallback: None,
            lookout,
        };
        if rank == 0 {
            for q in 1..n {
                let slot = x.flight.recv(HELLO_WORDS, q as c_int)?;
                x.slots.push(slot);
            }
        } else {
            // The answer's receive first: if it cannot be posted, rank 0
            // gets a failure notice instead of our first message.
            x.answer = Some(x.flight.recv(answer_room(n), 0)?);
            x.flight.send(&mine, 0)?;
        }
        Ok(x)
    }

    /// Rank 0: every first message arrived; find the layout, compare the
    /// settings, and answer every rank.
    fn decide(&mut self) -> Result<(), c_int> {
        for slot in std::mem::take(&mut self.slots) {
            let w = self.flight.take(slot);
            self.names.push(w[..].try_into().expect("HELLO_WORDS words"));
        }
        let n = self.names.len();
        for (q, w) in self.names.iter().enumerate() {
            match words::greeting(w[0]) {
                Greeting::Stranger => {
                    report::warn(Topic::NotHwbarr, &words::stranger(q as c_int));
                    return Err(ERROR);
                }
                Greeting::Version(v) if self.fallback.is_none() => {
                    self.fallback = Some(format!("rank {q} runs hwbarr protocol {v}, rank 0 protocol {}", words::protocol()));
                }
                _ => {}
            }
        }
        let names: Vec<Vec<u8>> =
            self.names.iter().map(|w| w[1..1 + NAME_WORDS].iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
        let ids = node_ids(&names);
        // Node ids are node indexes: both count nodes in order of their
        // lowest rank.
        let groups = layout::group(&ids);
        let nodes = groups.len();
        // `auto` resolved once, by the most populous node, for every node.
        // A rank of another protocol version is left out of the comparison:
        // its words may mean something else, and every rank falls back.
        let largest = layout::largest(&groups);
        let own_cores = (self.own_cores)(largest);
        let settings: Vec<Settings> = self
            .names
            .iter()
            .map(|w| match words::greeting(w[0]) {
                Greeting::Ours => Settings::requested_from_words(&w[1 + NAME_WORDS..]).unwrap_or(self.settings),
                _ => self.settings,
            })
            .map(|s| Settings { algorithm: s.algorithm.for_node(largest, own_cores), ..s })
            .collect();
        let algs: Vec<(c_int, Algorithm)> = settings.iter().enumerate().map(|(q, s)| (q as c_int, s.algorithm)).collect();
        let inters: Vec<(c_int, InterAlgorithm)> =
            settings.iter().enumerate().map(|(q, s)| (q as c_int, inter::choose(s.inter, nodes))).collect();
        let mine = &settings[0];
        let inter = inter::choose(mine.inter, nodes);
        let mut differ = Vec::new();
        if let Some(d) = words::differ(&algs) {
            differ.push(("algorithm", d));
        }
        if let Some(d) = words::differ(&inters) {
            differ.push(("inter", d));
        }
        // Falling back, nobody runs the settings compared: no disagreement.
        if !differ.is_empty() && self.fallback.is_none() {
            let chosen = format!("settings (algorithm {}, inter {inter})", mine.algorithm);
            self.disagreement = Some(words::disagreement(&differ, &chosen));
        }
        let code = |a: Algorithm| Settings { algorithm: a, inter: None }.words()[0];
        let inter_code = Settings { algorithm: mine.algorithm, inter: Some(inter) }.words()[1];
        let tail = [words::hello(), code(mine.algorithm), inter_code, self.fallback.is_some() as u64];
        let reply = |q: usize| match words::greeting(self.names[q][0]) {
            Greeting::Ours => answer(tail, &groups, largest, ids[q] as usize, q as c_int),
            _ => ids.iter().map(|&i| u64::from(i)).chain(tail).collect(),
        };
        self.reply = reply(0);
        for q in 1..n {
            self.flight.send(&reply(q), q as c_int)?;
        }
        Ok(())
    }

    /// Advances without blocking: `Ok(Some(layout, agreed))` once known.
    pub fn poll(&mut self) -> Result<Option<(Layout, Agreed)>, c_int> {
        if !self.flight.done()? {
            self.lookout.check(&mut self.flight)?;
            return Ok(None);
        }
        if self.rank == 0 && !self.answered {
            self.decide()?;
            self.answered = true;
            return self.poll();
        }
        if let Some(slot) = self.answer.take() {
            self.reply = self.flight.take(slot).into();
        }
        let n = self.size;
        // Our version's answer starts with a greeting, version 2's with a
        // node id (below 2^32, never a greeting).
        let ours = words::greeting(self.reply[0]) == Greeting::Ours;
        let tail = if ours { &self.reply[..TAIL_WORDS] } else { &self.reply[n..n + TAIL_WORDS] };
        let greeting = words::greeting(tail[0]);
        if greeting == Greeting::Stranger {
            report::warn(Topic::NotHwbarr, &words::stranger(0));
            return Err(ERROR);
        }
        // A rank 0 of another protocol version falls back with every rank,
        // whatever its settings words mean there: read them only from ours.
        let fallback = match (greeting, tail[3], self.fallback.take()) {
            (Greeting::Version(v), _, _) => {
                Some(format!("rank 0 runs hwbarr protocol {v}, rank {} protocol {}", self.rank, words::protocol()))
            }
            (_, 0, _) => None,
            (_, _, Some(why)) => Some(why),
            (_, _, None) => Some("hwbarr protocol versions differ between ranks".into()),
        };
        let s = match Settings::from_words(&tail[1..3]) {
            Some(s) if greeting == Greeting::Ours => s,
            _ if fallback.is_some() => Settings { algorithm: Algorithm::Linear, inter: None },
            _ => {
                report::warn(Topic::NotHwbarr, &words::stranger(0));
                return Err(ERROR);
            }
        };
        let layout = if ours {
            read_answer(&self.reply, self.rank)
        } else {
            let ids: Vec<u32> = self.reply[..n].iter().map(|&i| i as u32).collect();
            Some(Layout::from_nodes(&ids, self.rank))
        };
        let Some(layout) = layout else {
            report::warn(Topic::NotHwbarr, &words::stranger(0));
            return Err(ERROR);
        };
        let agreed = Agreed {
            algorithm: s.algorithm,
            inter: Some(s.inter.unwrap_or_else(|| inter::choose(None, 1))),
            fallback,
            disagreement: self.disagreement.take(),
        };
        Ok(Some((layout, agreed)))
    }
}

/// Gives each distinct name an id, in order of first appearance.
pub fn node_ids(names: &[Vec<u8>]) -> Vec<u32> {
    let mut seen: std::collections::HashMap<&[u8], u32> = std::collections::HashMap::new();
    names
        .iter()
        .map(|n| {
            let next = seen.len() as u32;
            *seen.entry(&n[..]).or_insert(next)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uneven_nodes() {
        // 1/2/1 ranks: a, b, b, c.
        let ids = node_ids(&[b"a".to_vec(), b"b".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(ids, vec![0, 1, 1, 2]);
        let t = Layout::from_nodes(&ids, 2);
        assert_eq!((t.local.clone(), t.me, t.leaders.clone(), t.node), (vec![1, 2], 1, vec![], 1));
        assert_eq!((t.largest, t.nodes), (2, 3));
        assert!(!t.is_leader());
        let t = Layout::from_nodes(&ids, 3);
        assert_eq!((t.local.clone(), t.me, t.leaders.clone(), t.node), (vec![3], 0, vec![0, 1, 3], 2));
        assert!(t.is_leader());
        // Interleaved placement: a b a b.
        let t = Layout::from_nodes(&[0, 1, 0, 1], 3);
        assert_eq!((t.local, t.me, t.leaders, t.node), (vec![1, 3], 1, vec![], 1));
        let t = Layout::from_nodes(&[0, 1, 0, 1], 1);
        assert_eq!((t.local, t.me, t.leaders, t.node), (vec![1, 3], 0, vec![0, 1], 1));
    }

    /// Every rank reads from its answer the layout it would find from every
    /// rank's node id, a leader with only the leaders it talks to (all for
    /// the counter broadcast or when the ranks fall back, its partners for
    /// dissemination); what rank 0 sends grows with the ranks per node, and
    /// with one rank per node, with log2 of the nodes for dissemination.
    #[test]
    fn answers_carry_each_rank_its_layout() {
        let (toggle, counter, dissemination) = (1, 1, 2);
        let cases: [Vec<u32>; 5] = [
            vec![0, 1, 1, 2],
            vec![0, 1, 0, 1, 0, 1, 0, 1, 0, 1],
            (0..9).collect(),
            (0..512).map(|r| r / 64).collect(),
            (0..4096).collect(),
        ];
        for (inter, fallback) in [(counter, 0), (dissemination, 0), (dissemination, 1), (counter, 1)] {
            let tail = [words::hello(), toggle, inter, fallback];
            let everyone = inter == counter && fallback == 0;
            for ids in &cases {
                let n = ids.len();
                let groups = layout::group(ids);
                let largest = layout::largest(&groups);
                let mut sent = 0;
                for q in 0..n {
                    let w = answer(tail, &groups, largest, ids[q] as usize, q as c_int);
                    assert_eq!(&w[..TAIL_WORDS], &tail);
                    assert!(w.len() <= answer_room(n), "{} words for {n} ranks", w.len());
                    let mut padded = w.clone();
                    padded.resize(answer_room(n), 0);
                    let t = read_answer(&padded, q as c_int).expect("readable");
                    let mut want = Layout::from_nodes(ids, q as c_int);
                    if want.is_leader() && !everyone {
                        // Falling back, none: nobody talks between nodes.
                        let talks =
                            if fallback == 1 { vec![] } else { inter::partners(InterAlgorithm::Dissemination, want.node, want.nodes) };
                        for (j, l) in want.leaders.iter_mut().enumerate() {
                            if !talks.contains(&j) {
                                *l = NO_LEADER;
                            }
                        }
                    }
                    assert_eq!(t, want, "rank {q} of {ids:?}, tail {tail:?}");
                    sent += w.len();
                    // Cut short or read by another rank: refused.
                    assert_eq!(read_answer(&w[..w.len() - 1], q as c_int), None, "rank {q}");
                    let other = ((q + 1) % n) as c_int;
                    assert!(groups[ids[q] as usize].contains(&other) || read_answer(&padded, other).is_none());
                }
                match (n, everyone, fallback) {
                    // 8 nodes of 64 (rank 0's own answer counted): 504
                    // ranks get 73 words, 8 leaders 81 (79 with 6 of the
                    // 8 leaders, 73 with none); every rank's node id to
                    // each would be 516 words.
                    (512, true, _) => assert_eq!(sent, 504 * 73 + 8 * 81),
                    (512, false, 0) => assert_eq!(sent, 504 * 73 + 8 * 79),
                    (512, false, _) => assert_eq!(sent, 512 * 73),
                    // One rank per node: every rank leads. All leaders to
                    // each, 4096 + 10 words (134 MB in all); its 23
                    // partners and itself, 34 words (1.1 MB); none, 10.
                    (4096, true, _) => assert_eq!(sent, 4096 * (4096 + 10)),
                    (4096, false, 0) => assert_eq!(sent, 4096 * 34),
                    (4096, false, _) => assert_eq!(sent, 4096 * 10),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn names_as_words() {
        let a = name_words("nodea");
        assert_eq!(a[0].to_le_bytes(), *b"nodea\0\0\0");
        assert!(a[1..].iter().all(|&w| w == 0));
        // Long names are cut to 64 bytes: equal prefixes, same node.
        let long = "x".repeat(100);
        assert_eq!(name_words(&long), name_words(&long[..64]));
    }
}

#[cfg(test)]
mod exchange_tests {
    use super::*;
    use crate::p2p::mem;

    /// Two nodes, placed a b a b; rank 2 asks for another inter algorithm.
    #[test]
    fn two_nodes_find_their_layout_and_agree() {
        let out = mem::run(mem::network(&["a", "b", "a", "b"]), |ep| {
            let r = ep.rank();
            let inter = (r == 2).then_some(InterAlgorithm::Dissemination);
            let s = Settings { algorithm: Algorithm::Toggle, inter };
            let mut x = LayoutExchange::start(ep, r, 4, s, |_| false, Lookout::new(None, None)).unwrap();
            loop {
                if let Some(done) = x.poll().unwrap() {
                    // Rank 0 answered in our version's form, not with
                    // every rank's node id.
                    assert_eq!(words::greeting(x.reply[0]), Greeting::Ours, "rank {r}");
                    return done;
                }
                std::thread::yield_now();
            }
        });
        for (r, (t, a)) in out.iter().enumerate() {
            assert_eq!(t, &Layout::from_nodes(&[0, 1, 0, 1], r as c_int));
            assert_eq!((a.algorithm, a.inter, a.fallback.is_none()), (Algorithm::Toggle, Some(InterAlgorithm::Counter), true));
            assert_eq!(a.disagreement.is_some(), r == 0);
        }
        assert_eq!((out[3].0.local.clone(), out[3].0.leaders.clone(), out[3].0.node), (vec![1, 3], vec![], 1));
        assert_eq!((out[1].0.local.clone(), out[1].0.leaders.clone(), out[1].0.node), (vec![1, 3], vec![0, 1], 1));
        assert!(out[0].1.disagreement.as_ref().unwrap().contains("dissemination on rank 2"));
    }

    /// The layout exchange on `hosts` (rank r on `hosts[r]`), rank r
    /// asking for `algs[r]`, the ranks in `next` speaking the next protocol
    /// version: what each rank agreed.
    fn agree(hosts: &[&'static str], algs: &[Algorithm], next: &[c_int]) -> Vec<Agreed> {
        let n = hosts.len() as c_int;
        let algs = algs.to_vec();
        let next = next.to_vec();
        let out = mem::run(mem::network(hosts), move |ep| {
            let r = ep.rank();
            if next.contains(&r) {
                words::TEST_PROTOCOL.with(|p| p.set(Some(words::PROTOCOL + 1)));
            }
            let s = Settings { algorithm: algs[r as usize], inter: None };
            let mut x = LayoutExchange::start(ep, r, n, s, |_| false, Lookout::new(None, None)).unwrap();
            loop {
                if let Some(done) = x.poll().unwrap() {
                    return done;
                }
                std::thread::yield_now();
            }
        });
        out.into_iter().map(|(_, a)| a).collect()
    }

    /// `auto` follows the most populous node, not the communicator's size:
    /// 10 ranks on two nodes of 5 run the line barrier, 9 + 1 the toggle
    /// tree; every rank agrees on rank 0's resolved choice.
    #[test]
    fn auto_is_resolved_by_the_most_populous_node() {
        use Algorithm::{Auto, Line, Toggle};
        let five_five = ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"];
        let nine_one = ["a", "a", "a", "a", "a", "b", "a", "a", "a", "a"];
        let eight_one = ["a", "a", "a", "a", "a", "b", "a", "a", "a"];
        for (hosts, want) in [(&five_five[..], Line), (&nine_one, Toggle), (&eight_one, Line)] {
            let out = agree(hosts, &vec![Auto; hosts.len()], &[]);
            assert!(out.iter().all(|a| a.algorithm == want && a.fallback.is_none()), "{want}: {out:?}");
            assert!(out[0].disagreement.is_none(), "{want}: {out:?}");
        }
        // A rank that names what `auto` resolves to agrees with it.
        let mut algs = [Auto; 10];
        algs[3] = Line;
        let out = agree(&five_five, &algs, &[]);
        assert!(out.iter().all(|a| a.algorithm == Line) && out[0].disagreement.is_none(), "{out:?}");
        // Rank 0's explicit choice wins over the others' `auto`, and is
        // named as a disagreement with what theirs resolved to.
        let mut algs = [Auto; 10];
        algs[0] = Toggle;
        let out = agree(&five_five, &algs, &[]);
        assert!(out.iter().all(|a| a.algorithm == Toggle), "{out:?}");
        let d = out[0].disagreement.as_deref().expect("rank 0 names the disagreement");
        assert!(d.contains("toggle on rank 0") && d.contains("line on ranks 1, 2"), "{d}");
    }

    /// A rank of another protocol version is not compared: its words may
    /// mean something else (here: version 1 resolved `auto` by the
    /// communicator's size, toggle at 10 ranks, where 5 + 5 gives line).
    /// Nor are the others, who disagree (rank 5): every rank falls back,
    /// so nobody runs the settings compared.
    #[test]
    fn another_version_is_not_named_as_a_disagreement() {
        let hosts = ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"];
        let mut algs = [Algorithm::Auto; 10];
        algs[3] = Algorithm::Toggle;
        algs[5] = Algorithm::Counter;
        let out = agree(&hosts, &algs, &[3]);
        assert!(out.iter().all(|a| a.fallback.is_some()), "{out:?}");
        assert!(out[0].disagreement.is_none(), "{:?}", out[0].disagreement);
    }

    /// Answers whose parts do not fit together are refused: leaders sent
    /// to a rank that does not lead, none to one that does, a node index
    /// past the nodes, a node larger than the most populous, our leader
    /// not at our node's place among the leaders.
    #[test]
    fn answers_that_do_not_fit_are_refused() {
        let tail = [words::hello(), 1, 2, 0];
        let ids = [0, 1, 0, 1];
        let groups = layout::group(&ids);
        let good = |q: usize| {
            let mut w = answer(tail, &groups, 2, ids[q] as usize, q as c_int);
            w.resize(answer_room(4), 0);
            w
        };
        assert!(read_answer(&good(3), 3).is_some() && read_answer(&good(1), 1).is_some());
        // [tail 4][node, nodes, largest, k][local k][m][leaders m], a
        // leader as (node << 32) | rank.
        let (node, nodes, largest) = (TAIL_WORDS, TAIL_WORDS + 1, TAIL_WORDS + 2);
        let leaders_at = HEAD_WORDS + 2;
        let mut w = good(3);
        w[leaders_at] = 2;
        w[leaders_at + 1] = 0;
        w[leaders_at + 2] = (1 << 32) | 1;
        assert_eq!(read_answer(&w, 3), None, "leaders to a rank that does not lead");
        let mut w = good(1);
        w[leaders_at] = 0;
        assert_eq!(read_answer(&w, 1), None, "no leaders to a leader");
        let mut w = good(3);
        w[node] = 2;
        assert_eq!(read_answer(&w, 3), None, "node past the nodes");
        let mut w = good(3);
        w[largest] = 1;
        assert_eq!(read_answer(&w, 3), None, "a node larger than the largest");
        let mut w = good(1);
        assert_eq!(w[leaders_at + 2], (1 << 32) | 1);
        w[leaders_at + 2] = (1 << 32) | 3;
        assert_eq!(read_answer(&w, 1), None, "our leader not at our node's place");
        let mut w = good(1);
        w[leaders_at + 1] = 1 << 32;
        assert_eq!(read_answer(&w, 1), None, "one node twice, another missing");
        let mut w = good(1);
        w[nodes] = 1;
        assert_eq!(read_answer(&w, 1), None, "node 1 of 1");
        // 8 nodes of one rank, dissemination: leader 0 talks to nodes 0,
        // 1, 2, 4, 6, 7; a partner left out, or one more sent, is refused.
        let ids: Vec<u32> = (0..8).collect();
        let groups = layout::group(&ids);
        let w = answer(tail, &groups, 1, 0, 0);
        let m = HEAD_WORDS + 1;
        assert_eq!(w[m], 6);
        let pad = |mut v: Vec<u64>| {
            v.resize(answer_room(8), 0);
            v
        };
        assert!(read_answer(&pad(w.clone()), 0).is_some());
        let mut short = w.clone();
        short[m] = 5;
        short.remove(m + 3);
        assert_eq!(read_answer(&pad(short), 0), None, "partner 2 left out");
        let mut more = w.clone();
        more[m] = 7;
        more.insert(m + 5, (3 << 32) | 3);
        assert_eq!(read_answer(&pad(more), 0), None, "leader 3 is no partner");
    }

    /// A rank 0 of a later protocol whose settings words we cannot read
    /// (an algorithm we do not know): every other rank falls back with it
    /// instead of failing the communicator.
    #[test]
    fn a_later_rank_0_with_unreadable_settings_is_followed_into_fallback() {
        let hosts = ["a", "b", "a", "b"];
        let out = mem::run(mem::network(&hosts), move |ep| {
            let r = ep.rank();
            if r != 0 {
                let s = Settings { algorithm: Algorithm::Line, inter: None };
                let mut x = LayoutExchange::start(ep, r, 4, s, |_| false, Lookout::new(None, None)).unwrap();
                loop {
                    if let Some((_, a)) = x.poll().unwrap() {
                        return Some(a);
                    }
                    std::thread::yield_now();
                }
            }
            // Rank 0, by hand: hear everyone, answer as a later version.
            words::TEST_PROTOCOL.with(|p| p.set(Some(words::PROTOCOL + 1)));
            let mut f = Flight::new(ep);
            let slots: Vec<Slot> = (1..4).map(|q| f.recv(HELLO_WORDS, q).unwrap()).collect();
            while !f.done().unwrap() {
                std::thread::yield_now();
            }
            for slot in slots {
                f.take(slot);
            }
            let answer = [0, 1, 0, 1, words::hello(), 7, 0, 1];
            for q in 1..4 {
                f.send(&answer, q).unwrap();
            }
            while !f.done().unwrap() {
                std::thread::yield_now();
            }
            None
        });
        for (r, a) in out.iter().enumerate().skip(1) {
            let a = a.as_ref().expect("a peer's outcome");
            let why = a.fallback.as_deref().unwrap_or_else(|| panic!("rank {r} did not fall back"));
            assert!(why.contains(&format!("rank 0 runs hwbarr protocol {}", words::PROTOCOL + 1)), "rank {r}: {why}");
        }
    }

    /// A rank with another protocol version (rank 0 or another): every rank
    /// learns the layout and falls back.
    #[test]
    fn another_protocol_version_makes_every_rank_fall_back() {
        for odd in [0, 3] {
            let out = mem::run(mem::network(&["a", "b", "a", "b"]), move |ep| {
                let r = ep.rank();
                if r == odd {
                    words::TEST_PROTOCOL.with(|p| p.set(Some(words::PROTOCOL + 1)));
                }
                let s = Settings { algorithm: Algorithm::Counter, inter: None };
                let mut x = LayoutExchange::start(ep, r, 4, s, |_| false, Lookout::new(None, None)).unwrap();
                loop {
                    if let Some(done) = x.poll().unwrap() {
                        // Rank 0 answers a rank of its own version in that
                        // version's form, the others in version 2's.
                        let same = (r == odd) == (odd == 0);
                        let ours = words::greeting(x.reply[0]) == Greeting::Ours;
                        assert_eq!(ours, same, "rank {r} (odd {odd})");
                        return (done, ours);
                    }
                    std::thread::yield_now();
                }
            });
            for (r, ((t, a), ours)) in out.iter().enumerate() {
                // Falling back, our version's answer names no leaders
                // (nobody talks between nodes), version 2's every one.
                let mut want = Layout::from_nodes(&[0, 1, 0, 1], r as c_int);
                if *ours {
                    want.leaders.fill(NO_LEADER);
                }
                assert_eq!(t, &want);
                let why = a.fallback.as_deref().unwrap_or_else(|| panic!("rank {r} did not fall back (odd {odd})"));
                assert!(why.contains("protocol"), "rank {r}: {why}");
            }
        }
    }
}
