//! Time the census of one binary: `cargo run --release -p pcmap-inline --example census -- FILE`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: census FILE")?;
    let t0 = std::time::Instant::now();
    let file = std::fs::File::open(&path)?;
    // SAFETY: the file is not modified while mapped (read-only benchmark input).
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let data = pcmap_inline::DebugData::load(&map)?;
    let t1 = std::time::Instant::now();
    let info = pcmap_inline::extract_sites(&data)?;
    let t2 = std::time::Instant::now();
    let census = pcmap_inline::census::Census::new(&info);
    let t3 = std::time::Instant::now();
    eprintln!(
        "load {:?} extract {:?} census {:?} total {:?}: {} sites, {} args, {} distinct locations",
        t1 - t0,
        t2 - t1,
        t3 - t2,
        t3 - t0,
        census.sites,
        census.args,
        census.distinct_locations
    );
    println!("{}", serde_json::to_string_pretty(&census)?);
    Ok(())
}
