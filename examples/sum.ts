// Two backend calls in parallel, then plain TypeScript on the results.
// Run: sandgate run examples/sum.ts --config examples/sandgate.toml
const [a, b] = await Promise.all([
  everything.get_sum({ a: 2, b: 3 }),
  everything["get-sum"]({ a: 10, b: 20 }),
]);
console.log("first:", a);
return { a, b };
