//! Wall time of MPI_Init + MPI_Finalize in one process, in microseconds,
//! printed by every rank as `init_finalize_us=<t>`. `make bench` launches
//! it repeatedly with and without hwbarr on the component path.

fn main() {
    let t0 = std::time::Instant::now();
    let universe = mpi::initialize().expect("MPI_Init");
    drop(universe); // MPI_Finalize
    println!("init_finalize_us={}", t0.elapsed().as_micros());
}
