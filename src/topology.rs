//! Where a node's ranks sit in its cache hierarchy, so that the toggle
//! barrier's bank tree follows it (`core::toggle::Shape::grouped`): one
//! bank per L3 domain, one per package above them, the root above those.
//! An L3 domain here is also split by NUMA node: where a package's L3 spans
//! several nodes (Intel's sub-NUMA clustering) each node's part of it is a
//! domain of its own, so that the groups follow the clusters and fewer
//! ranks share a bank's line; where a node holds several L3 domains (AMD's
//! NPS settings) the L3 decides.
//! A bank's line is then written only by ranks of one domain (or by one
//! climber per domain below), and an arrival crosses each level once. The
//! polled barrier's tree (`core::polled::Tree::grouped`) follows it too:
//! each domain's wires read by one of its ranks, the leaders by rank 0.
//!
//! A rank's place comes from `coll_hwbarr_topology`: `auto` takes the
//! binding Open MPI's runtime reports for it (its locality string, in the
//! hwloc topology Open MPI uses: the machine's, or one given to Open MPI
//! as an XML file) when that lies within one domain and the rank runs
//! where it says; else it reads the CPUs
//! it may run on (`/proc/self/status`) and the machine's caches (sysfs);
//! a rank bound wider than one domain takes the domain of the CPU it runs
//! on, unless the node is oversubscribed: then it has no place there and
//! joins its unplaced peers in banks of up to 64, as with `flat`. A synthetic machine
//! in hwloc's synthetic syntax (`package:2 l3:12 core:8`, `package:2 numa:4
//! core:14`: each NUMA node or L3 below a package is a domain) places node-local
//! rank i on core i (compactly, wrapping around), for tests and for
//! machines whose ranks are placed that way. Free of Open MPI: the caller
//! passes its locality string.

use std::path::Path;

use crate::core::polled::Tree;
use crate::core::toggle::Shape;

/// A rank's place: its package and L3 domain (machine-wide ids; the
/// domain is an L3 within one NUMA node), each None when the rank is not
/// bound inside one. A package id from Open MPI's report carries
/// `REPORTED_IDS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place {
    pub package: Option<u32>,
    pub l3: Option<u32>,
}

impl Place {
    pub const UNKNOWN: Place = Place { package: None, l3: None };

    /// As one word, for the device's table of places.
    pub fn word(self) -> u64 {
        let part = |x: Option<u32>| x.map_or(u32::MAX as u64, u64::from);
        (part(self.package) << 32) | part(self.l3)
    }

    pub fn from_word(w: u64) -> Place {
        let part = |x: u64| (x != u32::MAX as u64).then_some(x as u32);
        Place { package: part(w >> 32), l3: part(w & 0xffff_ffff) }
    }

    /// In words, for verbose output: the package, NUMA node and L3 in the
    /// numbering they came in.
    pub fn describe(self) -> String {
        let numbering = match self.package {
            Some(p) if p & REPORTED_IDS != 0 => "Open MPI's logical indices",
            _ => "the kernel's ids",
        };
        let package = self.package.map_or("unknown".to_string(), |p| (p & !REPORTED_IDS).to_string());
        match (self.package, self.l3) {
            (None, None) => "none".to_string(),
            (_, Some(d)) => {
                let (numa, l3) = domain_parts(d);
                format!("package {package}, NUMA node {numa}, L3 {l3}, by {numbering}")
            }
            (Some(_), None) => format!("package {package}, no one L3 domain, by {numbering}"),
        }
    }
}

/// Set in the package id of a place read from Open MPI's report. Its ids
/// are logical indices in Open MPI's hwloc topology, sysfs's the kernel's
/// ids, and the two need not agree: with the tag, ranks of one node placed
/// one way never share a group with ranks placed the other (a rank rebound
/// after launch groups apart from its peers, which costs up to two levels
/// of the toggle tree and one of the polled, rather than with ranks of
/// another domain, which would cost a line's trips between domains on
/// every barrier). Where the numberings agree, as on most machines, such
/// ranks group apart all the same.
const REPORTED_IDS: u32 = 1 << 31;

/// Most cores a synthetic machine may have (`Topology::parse`).
pub const MAX_SYNTHETIC_CORES: u64 = 1 << 20;

/// How ranks are placed (`coll_hwbarr_topology`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// From each rank's binding and the machine's caches.
    Auto,
    /// No grouping: banks of 64 ranks in rank order.
    Flat,
    /// A synthetic machine; node-local rank i on core i. Its L3 domains
    /// per package count each NUMA node's part of an L3 apart.
    Synthetic { packages: u32, l3_per_package: u32, cores_per_l3: u32 },
}

impl Topology {
    /// `auto`, `flat`, or `package:P [numa:N] l3:L core:C` (hwloc's
    /// synthetic syntax; `l3cache`, `socket`, `numanode` accepted; missing
    /// levels count 1). NUMA nodes and L3s below a package multiply into
    /// its domains, in either order (a node of several L3s, or an L3 of
    /// several nodes).
    pub fn parse(s: &str) -> Result<Topology, String> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "" | "auto" => return Ok(Topology::Auto),
            "flat" => return Ok(Topology::Flat),
            _ => {}
        }
        let bad = || {
            format!(
                "invalid value '{s}' for MCA parameter coll_hwbarr_topology (valid values: auto, flat, or a \
                 synthetic machine such as 'package:2 l3:12 core:8' or 'package:2 numa:4 core:14')"
            )
        };
        let (mut packages, mut numa, mut l3, mut cores) = (1u32, 1u32, 1u32, 1u32);
        for part in t.split_whitespace() {
            let (level, count) = part.split_once(':').ok_or_else(bad)?;
            let count: u32 = count.parse().ok().filter(|&c| c > 0 && c <= 4096).ok_or_else(bad)?;
            match level {
                "package" | "socket" => packages = count,
                "numa" | "numanode" => numa = count,
                "l3" | "l3cache" => l3 = count,
                "core" | "pu" => cores = count,
                _ => return Err(bad()),
            }
        }
        // Cores in all, computed in `place`: at most 2^20, so that the
        // product can neither wrap nor be 0.
        if u64::from(packages) * u64::from(numa) * u64::from(l3) * u64::from(cores) > MAX_SYNTHETIC_CORES {
            return Err(bad());
        }
        Ok(Topology::Synthetic { packages, l3_per_package: numa * l3, cores_per_l3: cores })
    }

    /// The place of node-local rank `local`; `own`: this process's place
    /// by its binding (`auto`).
    pub fn place(&self, local: usize, own: Place) -> Place {
        match *self {
            Topology::Auto => own,
            Topology::Flat => Place::UNKNOWN,
            Topology::Synthetic { packages, l3_per_package, cores_per_l3 } => {
                let cores = (packages * l3_per_package * cores_per_l3) as usize;
                let l3 = ((local % cores) / cores_per_l3 as usize) as u32;
                Place { package: Some(l3 / l3_per_package), l3: Some(l3) }
            }
        }
    }
}

/// The toggle tree for ranks at `places` (node-local rank order): ranks
/// grouped by L3 domain, domains by package, packages at the root; ranks
/// without a place are grouped by 64.
pub fn shape(places: &[Place]) -> Shape {
    Shape::grouped(&paths(places))
}

/// The polled barrier's tree for ranks at `places`: each L3 domain read by
/// its lowest rank, the domains' leaders by rank 0 (by package first if
/// they are many); ranks without a place in groups of `MAX_FAN_IN`.
pub fn tree(places: &[Place]) -> Tree {
    Tree::grouped(&paths(places))
}

fn paths(places: &[Place]) -> Vec<[Option<u32>; 2]> {
    places.iter().map(|p| [p.package, p.l3]).collect()
}

/// This process's place, from the CPUs it may run on (`status`: the text
/// of `/proc/self/status`) and the caches under `sysfs` (normally
/// `/sys/devices/system/cpu`): a package and an L3 domain when every
/// allowed CPU shares them.
///
/// When they do not (by default Open MPI binds each of more than 2 ranks
/// to a package or NUMA domain; or the job runs unbound), `running`, the CPU the process runs on now,
/// if the caller gives one and it is allowed: a busy rank with a core of
/// its own mostly stays where the scheduler put it. The caller gives none
/// when the node is oversubscribed, where ranks keep moving. A rank that
/// moves later costs its bank's line a trip between domains, never
/// correctness: every rank builds the tree from the places each rank
/// published once.
///
/// Also whether the running CPU decided it.
fn place_of(status: &str, sysfs: &Path, running: Option<usize>) -> (Place, bool) {
    let Some(cpus) = allowed_cpus(status) else {
        return (Place::UNKNOWN, false);
    };
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok().and_then(|s| s.trim().parse::<u32>().ok());
    // (The kernel writes a package id as a signed int, so it never has the
    // tag's bit; the filter keeps it so should that change.)
    let package_of = |c: usize| {
        read(sysfs.join(format!("cpu{c}/topology/physical_package_id"))).filter(|&p| p & REPORTED_IDS == 0)
    };
    let l3_of = |c: usize| {
        // The cache of level 3 (its index differs between machines).
        (0..8).find_map(|i| {
            let dir = sysfs.join(format!("cpu{c}/cache/index{i}"));
            (read(dir.join("level")) == Some(3)).then(|| read(dir.join("id"))).flatten()
        })
    };
    // The NUMA node: the `node<N>` entry of the CPU's directory (none on
    // a kernel without NUMA: one node).
    let numa_of = |c: usize| {
        let entries = std::fs::read_dir(sysfs.join(format!("cpu{c}"))).ok()?;
        entries.flatten().find_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse::<u32>().ok())
    };
    let domain_of = |c: usize| Some(domain_id(package_of(c)?, numa_of(c).unwrap_or(0), l3_of(c)?));
    let common = |f: &dyn Fn(usize) -> Option<u32>| {
        let first = f(*cpus.first()?)?;
        cpus.iter().all(|&c| f(c) == Some(first)).then_some(first)
    };
    let (mut package, mut l3) = (common(&package_of), common(&domain_of));
    let by_running = running.filter(|c| l3.is_none() && cpus.contains(c));
    if let Some(c) = by_running {
        (package, l3) = (package_of(c), domain_of(c));
    }
    let place = Place { package, l3 };
    (place, by_running.is_some() && place.l3.is_some())
}

/// An L3 domain's machine-wide id: L3 ids are unique only with their
/// package, and a NUMA node splits an L3 that spans several. Ids past the
/// bits kept (256 packages, 256 nodes, 65,536 L3s) could name two domains
/// alike, which would cost line transfers, never correctness.
fn domain_id(package: u32, numa: u32, l3: u32) -> u32 {
    ((package & 0xff) << 24) | ((numa & 0xff) << 16) | (l3 & 0xffff)
}

/// The NUMA node and L3 kept in a `domain_id`.
fn domain_parts(id: u32) -> (u32, u32) {
    ((id >> 16) & 0xff, id & 0xffff)
}

/// This process's place from the binding Open MPI's runtime reports for
/// it, its locality string (`SK1:L34:L216:L116:CR16:HT16:NM2`: the
/// package, caches, core, hardware thread and NUMA node it is bound within,
/// each a list of logical indices in Open MPI's hwloc topology, which is
/// the machine's own or one given to Open MPI as an XML file): a place
/// when the binding lies within one package and one L3, and within one
/// NUMA node if the string names nodes. None otherwise, or when the string
/// is not one.
pub fn place_from_locality(s: &str) -> Option<Place> {
    let (package, l3, numa) = (span(s, "SK")?, span(s, "L3")?, span(s, "NM")?);
    let (Span::One(package), Span::One(l3)) = (package, l3) else {
        return None;
    };
    // No room for the tag, or tagged it would read as none (`Place::word`).
    if package >= REPORTED_IDS - 1 {
        return None;
    }
    let numa = match numa {
        Span::Absent => 0,
        Span::One(n) => n,
        Span::Several => return None,
    };
    Some(Place { package: Some(package | REPORTED_IDS), l3: Some(domain_id(package, numa, l3)) })
}

/// How many objects of one type a binding covers.
enum Span {
    Absent,
    One(u32),
    Several,
}

/// The objects tagged `tag` in locality string `s`; None if malformed.
fn span(s: &str, tag: &str) -> Option<Span> {
    let Some(list) = s.split(':').find_map(|f| f.strip_prefix(tag)) else {
        return Some(Span::Absent);
    };
    match cpu_list(list)?[..] {
        [one] => u32::try_from(one).ok().map(Span::One),
        _ => Some(Span::Several),
    }
}

/// What Open MPI's runtime reports of where it bound this process.
#[derive(Clone, Copy, Debug)]
pub struct Reported<'a> {
    /// Its locality string (`place_from_locality`).
    pub locality: &'a str,
    /// The CPUs it bound the process to, as a list ("0-3,8"); none if not
    /// given.
    pub cpus: Option<&'a str>,
}

/// This process's place and how it was found, in words for verbose
/// output: from the binding Open MPI `reported` when that gives one
/// (`place_from_locality`) and the process runs where it says
/// (`report_holds`), else as `place_of` with `running` if `core_each`
/// (every rank of the node has a core); none if `status`
/// (`/proc/self/status`) could not be read. `online`: CPUs online.
pub fn own_place_and_source(
    reported: Option<Reported>,
    status: Option<&str>,
    sysfs: &Path,
    running: Option<usize>,
    core_each: bool,
    online: usize,
) -> (Place, String) {
    let mut aside = String::new();
    if let Some(r) = reported {
        match place_from_locality(r.locality) {
            Some(place) if report_holds(r.cpus, status, online) => {
                return (place, format!("from the binding Open MPI reports, {}", r.locality));
            }
            Some(_) => {
                let cpus = r.cpus.unwrap_or("not given");
                aside = format!("; Open MPI's report {} (CPUs {cpus}) is not its binding", r.locality);
            }
            None => aside = format!("; Open MPI's report {} names no one L3 domain", r.locality),
        }
    }
    let Some(status) = status else {
        return (Place::UNKNOWN, format!("none: /proc/self/status unreadable{aside}"));
    };
    let (place, by_running) = place_of(status, sysfs, running.filter(|_| core_each));
    let from = match (!by_running, place.l3.is_some(), core_each) {
        (false, _, _) => "from the CPU it ran on (its binding spans L3 domains)",
        (true, true, _) => "from its binding",
        (true, false, false) => "none in an L3 domain: its binding spans domains and the node is oversubscribed",
        (true, false, true) => "none in an L3 domain: neither its binding nor its CPU gives one",
    };
    (place, format!("{from}{aside}"))
}

/// Whether a process runs where Open MPI reports it bound it (`cpus`):
/// its own binding (`status`'s `Cpus_allowed_list`) is those CPUs, or
/// every CPU online, which is a binding that did not take (a core of a
/// topology given to Open MPI as a file that this machine lacks, where the
/// report is the place meant). A process rebound after launch (numactl or
/// taskset in the command, a library that binds) runs elsewhere: its own
/// binding decides then. Unreadable: the report stands.
fn report_holds(cpus: Option<&str>, status: Option<&str>, online: usize) -> bool {
    let Some(allowed) = status.and_then(allowed_cpus) else {
        return true;
    };
    let set = |mut v: Vec<usize>| {
        v.sort_unstable();
        v.dedup();
        v
    };
    let allowed = set(allowed);
    allowed.len() >= online || cpus.and_then(cpu_list).map(set).is_some_and(|c| c == allowed)
}

/// The CPUs a process may run on, from the text of `/proc/self/status`.
fn allowed_cpus(status: &str) -> Option<Vec<usize>> {
    status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).and_then(|l| cpu_list(l.trim()))
}

/// The CPUs that share `cpu`'s L3 cache, itself included, as `sysfs`
/// (`/sys/devices/system/cpu`) lists them for its level-3 cache; None
/// where it lists none.
pub fn l3_cpus(sysfs: &Path, cpu: usize) -> Option<Vec<usize>> {
    let list = (0..8).find_map(|i| {
        let dir = sysfs.join(format!("cpu{cpu}/cache/index{i}"));
        let level = std::fs::read_to_string(dir.join("level")).ok()?;
        (level.trim() == "3").then(|| std::fs::read_to_string(dir.join("shared_cpu_list")).ok()).flatten()
    })?;
    cpu_list(list.trim())
}

/// "0-3,8,10-11" as CPU numbers.
fn cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_settings_and_places_ranks_compactly() {
        assert_eq!(Topology::parse(" AUTO "), Ok(Topology::Auto));
        assert_eq!(Topology::parse("flat"), Ok(Topology::Flat));
        let t = Topology::parse("package:2 l3cache:12 core:8").unwrap();
        assert_eq!(t, Topology::Synthetic { packages: 2, l3_per_package: 12, cores_per_l3: 8 });
        assert!(Topology::parse("package:2 gpu:4").unwrap_err().contains("coll_hwbarr_topology"));
        // NUMA nodes below a package split it into domains, whether a node
        // holds several L3s or an L3 spans several nodes.
        let snc = Topology::parse("package:2 numa:4 core:14").unwrap();
        assert_eq!(snc, Topology::Synthetic { packages: 2, l3_per_package: 4, cores_per_l3: 14 });
        let nps = Topology::parse("package:2 NUMANode:2 l3:4 core:8").unwrap();
        assert_eq!(nps, Topology::Synthetic { packages: 2, l3_per_package: 8, cores_per_l3: 8 });
        assert_eq!(snc.place(27, Place::UNKNOWN), Place { package: Some(0), l3: Some(1) });
        assert_eq!(snc.place(56, Place::UNKNOWN), Place { package: Some(1), l3: Some(4) });
        assert!(Topology::parse("package:16 numa:256 core:512").is_err(), "2^20 cores at most, NUMA counted");
        assert!(Topology::parse("core:0").is_err() && Topology::parse("core").is_err());
        // Each level fits, the product would not (it wrapped to 0 in u32,
        // and placing a rank divided by it).
        assert!(Topology::parse("package:4096 l3:4096 core:256").is_err());
        assert!(Topology::parse("package:4096 l3:4096 core:4096").is_err());
        let big = Topology::parse("package:16 l3:256 core:256").unwrap();
        assert_eq!(big.place(1 << 20, Place::UNKNOWN), big.place(0, Place::UNKNOWN));
        let own = Place { package: Some(9), l3: Some(9) };
        assert_eq!(t.place(0, own), Place { package: Some(0), l3: Some(0) });
        assert_eq!(t.place(95, own), Place { package: Some(0), l3: Some(11) });
        assert_eq!(t.place(96, own), Place { package: Some(1), l3: Some(12) });
        assert_eq!(t.place(192, own), Place { package: Some(0), l3: Some(0) }, "wraps around");
        assert_eq!(Topology::Auto.place(5, own), own);
        let reported = place_from_locality("SK2147483646:L30").unwrap();
        for p in [own, Place::UNKNOWN, Place { package: Some(1), l3: None }, reported] {
            assert_eq!(Place::from_word(p.word()), p);
        }
        for big in ["SK2147483647:L30", "SK2147483648:L30"] {
            assert_eq!(place_from_locality(big), None, "{big}: no room for the tag");
        }
    }

    /// A fake sysfs named `name` of CPUs 0-7, CPU c described by
    /// `cpu(c)`: its package, the index of its L3 among its caches, the
    /// L3's id, and its NUMA node (the kernel's `cpu<c>/node<n>` entry; none
    /// on a kernel without NUMA).
    fn sysfs_tree(name: &str, cpu: fn(u32) -> (u32, u32, u32, Option<u32>)) -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("hwbarr-sysfs-{name}-{}", std::process::id()));
        for c in 0..8u32 {
            let (package, index, l3_id, node) = cpu(c);
            let dir = root.join(format!("cpu{c}"));
            std::fs::create_dir_all(dir.join("topology")).unwrap();
            std::fs::write(dir.join("topology/physical_package_id"), format!("{package}\n")).unwrap();
            let l3 = dir.join(format!("cache/index{index}"));
            std::fs::create_dir_all(&l3).unwrap();
            std::fs::write(l3.join("level"), "3\n").unwrap();
            std::fs::write(l3.join("id"), format!("{l3_id}\n")).unwrap();
            let same = (0..8u32).filter(|&o| (cpu(o).0, cpu(o).2) == (package, l3_id));
            std::fs::write(l3.join("shared_cpu_list"), same.map(|o| o.to_string()).collect::<Vec<_>>().join(",")).unwrap();
            if let Some(n) = node {
                std::fs::create_dir_all(dir.join(format!("node{n}"))).unwrap();
            }
        }
        root
    }

    /// A fake sysfs: 2 packages of 2 L3 domains of 2 CPUs (L3 at index 3,
    /// and at index 2 on the second package, as machines differ), no NUMA.
    fn fake_sysfs() -> std::path::PathBuf {
        sysfs_tree("plain", |c| (c / 4, if c < 4 { 3 } else { 2 }, (c / 2) % 2, None))
    }

    /// The CPUs sharing a CPU's L3, whatever the L3's index; none where
    /// sysfs has no L3.
    #[test]
    fn l3_cpus_from_sysfs() {
        let sys = fake_sysfs();
        assert_eq!(l3_cpus(&sys, 0), Some(vec![0, 1]));
        assert_eq!(l3_cpus(&sys, 3), Some(vec![2, 3]));
        assert_eq!(l3_cpus(&sys, 6), Some(vec![6, 7]), "L3 at index 2");
        assert_eq!(l3_cpus(&sys, 8), None, "no such CPU");
        assert_eq!(l3_cpus(&sys.join("nothing"), 0), None);
    }

    #[test]
    fn own_place_from_binding_and_caches() {
        let sys = fake_sysfs();
        let status = |list: &str| format!("Name:\tx\nCpus_allowed_list:\t{list}\n");
        let at = |list: &str| place_of(&status(list), &sys, None).0;
        assert_eq!(at("0-1"), Place { package: Some(0), l3: Some(0) });
        assert_eq!(at("3"), Place { package: Some(0), l3: Some(1) });
        assert_eq!(at("6,7"), Place { package: Some(1), l3: Some(domain_id(1, 0, 1)) });
        assert_eq!(at("4"), Place { package: Some(1), l3: Some(domain_id(1, 0, 0)) }, "package 1's first domain");
        assert_eq!(at("0-3"), Place { package: Some(0), l3: None }, "bound to a package only");
        assert_eq!(at("0-7"), Place::UNKNOWN, "unbound");
        assert_eq!(place_of("no list here", &sys, Some(0)), (Place::UNKNOWN, false));
        // Bound wider than a domain: the domain of the CPU it runs on, if
        // that is one it may run on.
        let running = |list: &str, cpu: usize| place_of(&status(list), &sys, Some(cpu)).0;
        assert_eq!(running("0-3", 3), Place { package: Some(0), l3: Some(1) }, "bound to package 0, on cpu 3");
        assert_eq!(running("0-7", 6), Place { package: Some(1), l3: Some(domain_id(1, 0, 1)) }, "unbound, on cpu 6");
        assert_eq!(running("0-3", 6), at("0-3"), "a CPU outside the binding is no hint");
        assert_eq!(running("6,7", 0), at("6,7"), "bound inside a domain: the binding decides");
        // How it was found, as verbose output says it.
        let source =
            |list: &str, cpu: Option<usize>, core_each: bool| own_place_and_source(None, Some(&status(list)), &sys, cpu, core_each, 8);
        let said = |place: Place, from: &str| (place, from.to_string());
        assert_eq!(source("6,7", Some(6), true), said(at("6,7"), "from its binding"));
        assert_eq!(source("0-3", Some(3), true).1, "from the CPU it ran on (its binding spans L3 domains)");
        assert_eq!(
            source("0-3", Some(3), false),
            said(at("0-3"), "none in an L3 domain: its binding spans domains and the node is oversubscribed")
        );
        assert_eq!(
            source("0-7", None, true),
            said(Place::UNKNOWN, "none in an L3 domain: neither its binding nor its CPU gives one")
        );
        let _ = std::fs::remove_dir_all(sys);
    }

    /// An L3 over two NUMA nodes (sub-NUMA clustering): each node's part is
    /// a domain; a node over two L3s (AMD's NPS): each L3 is one.
    #[test]
    fn numa_nodes_split_an_l3_that_spans_them() {
        let status = |list: &str| format!("Name:\tx\nCpus_allowed_list:\t{list}\n");
        // One package; one L3 over CPUs 0-7, nodes of 4 CPUs.
        let snc = sysfs_tree("snc", |c| (0, 3, 0, Some(c / 4)));
        let at = |list: &str, cpu: Option<usize>| place_of(&status(list), &snc, cpu).0;
        let node = |n| Place { package: Some(0), l3: Some(domain_id(0, n, 0)) };
        assert_eq!(at("0-3", None), node(0), "bound to node 0");
        assert_eq!(at("5", None), node(1));
        assert_ne!(node(0), node(1), "one L3, two domains");
        assert_eq!(at("0-7", None), Place { package: Some(0), l3: None }, "bound to the package");
        assert_eq!(at("0-7", Some(6)), node(1), "by the CPU it runs on");
        let _ = std::fs::remove_dir_all(snc);

        // One package; L3s of 4 CPUs, one node over all 8.
        let nps = sysfs_tree("nps", |c| (0, 3, c / 4, Some(0)));
        let at = |list: &str, cpu: Option<usize>| place_of(&status(list), &nps, cpu).0;
        let l3 = |i| Place { package: Some(0), l3: Some(domain_id(0, 0, i)) };
        assert_eq!(at("4-7", None), l3(1), "bound to an L3");
        assert_eq!(at("0-7", None), Place { package: Some(0), l3: None }, "bound to the node: two L3s");
        assert_eq!(at("0-7", Some(2)), l3(0));
        let _ = std::fs::remove_dir_all(nps);
    }

    /// Open MPI's locality string, as 4.1 and 5.0/6.0 write it, places a
    /// rank bound within one package and L3 (and NUMA node, when named),
    /// ahead of sysfs; a wider binding, no string, or a malformed one
    /// leaves the place to the binding and sysfs.
    #[test]
    fn open_mpis_locality_string_places_a_bound_rank() {
        let at = |p, n, l| Some(Place { package: Some(p | REPORTED_IDS), l3: Some(domain_id(p, n, l)) });
        assert_eq!(place_from_locality("SK0:L30:CR0:HT0:NM0"), at(0, 0, 0), "4.1");
        assert_eq!(place_from_locality("SK1:L34:L216:L116:CR16:HT16:NM2"), at(1, 2, 4), "5.0, 6.0");
        assert_eq!(place_from_locality("SK1:L37:CR30"), at(1, 0, 7), "no NUMA node named");
        assert_ne!(place_from_locality("SK0:L30:NM0"), place_from_locality("SK0:L30:NM1"), "an L3 split by nodes");
        assert_eq!(place_from_locality("SK0:L30-1:CR0-7:HT0-7:NM0"), None, "bound to two L3s");
        assert_eq!(place_from_locality("SK0:L30:CR0-7:HT0-7:NM0-1"), None, "an L3 over two nodes, bound to both");
        assert_eq!(place_from_locality("SK0-1:L30-15:NM0-3"), None, "bound to the machine");
        assert_eq!(place_from_locality("L30:CR0"), None, "no package");
        for bad in ["", "(null)", "SKx:L30", "SK0:L3:NM0", "SK0:L30:NM-"] {
            assert_eq!(place_from_locality(bad), None, "{bad:?}");
        }
        // Ahead of the binding read from sysfs when the process runs where
        // the report says, or anywhere (the binding did not take); said so.
        let sys = sysfs_tree("locality", |c| (c / 4, 3, (c / 2) % 2, None));
        let status = |list: &str| format!("Name:\tx\nCpus_allowed_list:\t{list}\n");
        let (on_01, on_all, on_6) = (status("0-1"), status("0-7"), status("6"));
        let report = |locality, cpus| Some(Reported { locality, cpus });
        let placed = |r: Option<Reported>, st: Option<&str>| {
            let (place, from) = own_place_and_source(r, st, &sys, Some(0), true, 8);
            (Some(place), from)
        };
        let from_open_mpi = "from the binding Open MPI reports, SK1:L33:NM1".to_string();
        assert_eq!(placed(report("SK1:L33:NM1", Some("0-1")), Some(&on_01)), (at(1, 1, 3), from_open_mpi.clone()));
        assert_eq!(placed(report("SK1:L33:NM1", Some("0,1")), Some(&on_01)).0, at(1, 1, 3), "the same CPUs");
        assert_eq!(placed(report("SK1:L33:NM1", Some("6")), Some(&on_all)), (at(1, 1, 3), from_open_mpi.clone()));
        assert_eq!(placed(report("SK1:L33:NM1", Some("0-1")), None), (at(1, 1, 3), from_open_mpi));
        // Rebound after launch, or no CPUs given to compare: its own
        // binding decides, and the report is named.
        let by_sysfs = own_place_and_source(None, Some(&on_6), &sys, Some(0), true, 8);
        assert_eq!(by_sysfs, (Place { package: Some(1), l3: Some(domain_id(1, 0, 1)) }, "from its binding".to_string()));
        let rebound = placed(report("SK0:L30:NM0", Some("0-1")), Some(&on_6));
        assert_eq!(rebound.0, Some(by_sysfs.0));
        assert_eq!(rebound.1, "from its binding; Open MPI's report SK0:L30:NM0 (CPUs 0-1) is not its binding");
        let unsure = placed(report("SK0:L30:NM0", None), Some(&on_6));
        assert_eq!(unsure.1, "from its binding; Open MPI's report SK0:L30:NM0 (CPUs not given) is not its binding");
        let wide = placed(report("SK0-1:L30-3", Some("0-7")), Some(&on_6));
        assert_eq!(wide, (Some(by_sysfs.0), "from its binding; Open MPI's report SK0-1:L30-3 names no one L3 domain".to_string()));
        let unread = own_place_and_source(None, None, &sys, Some(0), true, 8);
        assert_eq!(unread, (Place::UNKNOWN, "none: /proc/self/status unreadable".to_string()));
        let _ = std::fs::remove_dir_all(sys);
    }

    /// Ranks placed from Open MPI's report and ranks placed from sysfs
    /// never share a group, even where the two numberings give the same
    /// ids: the report's are hwloc's logical indices, sysfs's the kernel's.
    #[test]
    fn places_from_the_report_and_from_sysfs_never_group_together() {
        let sys = sysfs_tree("numberings", |c| (0, 0, c / 4, None));
        let status = |list: &str| format!("Name:\tx\nCpus_allowed_list:\t{list}\n");
        let (kernel, _) = own_place_and_source(None, Some(&status("0-3")), &sys, None, true, 8);
        let _ = std::fs::remove_dir_all(sys);
        let reported = place_from_locality("SK0:L30:NM0").unwrap();
        assert_eq!((kernel.package, kernel.l3), (Some(0), Some(domain_id(0, 0, 0))), "the same numbers");
        assert_ne!(kernel, reported);
        // A bank each for the two domains and the two packages, the root above.
        assert_eq!(shape(&[reported, reported, kernel, kernel]).banks(), 5);
        assert_eq!(shape(&[reported; 4]).banks(), 1);
        assert_eq!(kernel.describe(), "package 0, NUMA node 0, L3 0, by the kernel's ids");
        assert_eq!(reported.describe(), "package 0, NUMA node 0, L3 0, by Open MPI's logical indices");
        assert_eq!(place_from_locality("SK1:L34:NM2").unwrap().describe(), "package 1, NUMA node 2, L3 4, by Open MPI's logical indices");
        assert_eq!(Place { package: Some(1), l3: None }.describe(), "package 1, no one L3 domain, by the kernel's ids");
        assert_eq!(Place { package: None, l3: Some(5) }.describe(), "package unknown, NUMA node 0, L3 5, by the kernel's ids");
        assert_eq!(Place::UNKNOWN.describe(), "none");
    }
}
