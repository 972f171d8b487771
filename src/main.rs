fn main() {
    println!("dualscope");
}
