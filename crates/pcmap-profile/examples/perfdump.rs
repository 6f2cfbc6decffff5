//! Print the samples of a perf.data file as `pid tid time ip [from/to/M|P ...]`, or write a synthetic
//! branch-stack file: `perfdump write OUT BINARY_PATH BUILD_ID_HEX START`.
use pcmap_profile::perfdata::{BranchEntry, PerfFile, Record, writer};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args[1] == "write" {
        let mut w = writer::Writer::new(writer::Options {
            hw_idx: args.len() > 6,
            ..Default::default()
        });
        let start = u64::from_str_radix(&args[5], 16).unwrap();
        w.comm(100, 100, b"p1", 1000);
        w.mmap2(100, 100, start, 0x10000, 0, args[3].as_bytes(), 1001);
        let id: Vec<u8> = (0..args[4].len() / 2)
            .map(|i| u8::from_str_radix(&args[4][2 * i..2 * i + 2], 16).unwrap())
            .collect();
        w.build_id(-1, &id, args[3].as_bytes());
        for i in 0..5u64 {
            let branches = (0..3)
                .map(|j| BranchEntry {
                    from: start + 0x10 * j + i,
                    to: start + 0x100 + j,
                    flags: BranchEntry::make_flags(j == 1, j != 1, false, false, 0, 0),
                })
                .collect();
            w.sample(&writer::SampleSpec {
                ip: start + i,
                pid: 100,
                tid: 100,
                time: 2000 + i,
                period: 1,
                branches,
                hw_idx: 7,
            });
        }
        std::fs::write(&args[2], w.finish()).unwrap();
        return;
    }
    let data = std::fs::read(&args[1]).unwrap();
    let f = PerfFile::parse(&data).unwrap();
    eprintln!("attrs: {:?}", f.attrs);
    eprintln!(
        "build ids: {:?}",
        f.build_ids
            .iter()
            .map(|b| (
                b.build_id_hex(),
                String::from_utf8_lossy(&b.filename).into_owned()
            ))
            .collect::<Vec<_>>()
    );
    f.for_each_record(|r| {
        match r {
            Record::Sample(s) => {
                let mut line = format!(
                    "{} {} {} {:x}",
                    s.pid.unwrap_or(0),
                    s.tid.unwrap_or(0),
                    s.time.unwrap_or(0),
                    s.ip.unwrap_or(0)
                );
                if let Some(bs) = s.branch_stack {
                    for e in bs.iter() {
                        line += &format!(
                            " {:#x}/{:#x}/{}",
                            e.from,
                            e.to,
                            if e.mispredicted() {
                                'M'
                            } else if e.predicted() {
                                'P'
                            } else {
                                '-'
                            }
                        );
                    }
                }
                println!("{line}");
            }
            Record::Mmap(m) => eprintln!(
                "mmap pid {} {:#x}+{:#x} pgoff {:#x} {}",
                m.pid,
                m.start,
                m.len,
                m.pgoff,
                String::from_utf8_lossy(m.filename)
            ),
            other => {
                let _ = other;
            }
        }
        true
    })
    .unwrap();
}
