// Prints, as JSON, what real Guava does with strings: the murmur3_128 halves
// of some items, and the bit arrays of BloomFilter<CharSequence> built with
// Funnels.stringFunnel(UTF_8) (strategy MURMUR128_MITZ_64). bloomkit's bitmap
// backend must reproduce both. Run by scripts/guava-vectors.sh.
import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnels;
import com.google.common.hash.Hashing;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.ByteArrayInputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public class GuavaVectors {
    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static List<String> items(int count) {
        List<String> out = new ArrayList<>();
        String[] fixed = {"", "a", "hello", "héllo wörld", "日本語のテキスト", "emoji \uD83D\uDE00 pair",
            "https://example.com/path?q=1", "0123456789abcdef", "seventeen bytes!!"};
        for (String s : fixed) if (out.size() < count) out.add(s);
        for (int i = 0; out.size() < count; i++) out.add("item-" + i + (i % 7 == 0 ? "-é" : ""));
        return out;
    }

    public static void main(String[] args) throws Exception {
        StringBuilder json = new StringBuilder("{\n  \"guava\": \"31.1-jre\",\n  \"hashes\": [\n");
        List<String> hashed = items(40);
        for (int i = 0; i < hashed.size(); i++) {
            byte[] h = Hashing.murmur3_128().hashString(hashed.get(i), StandardCharsets.UTF_8).asBytes();
            ByteBuffer bb = ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN);
            json.append(String.format("    {\"item\": %s, \"h1\": \"%016x\", \"h2\": \"%016x\"}%s\n",
                quote(hashed.get(i)), bb.getLong(0), bb.getLong(8), i + 1 < hashed.size() ? "," : ""));
        }
        json.append("  ],\n  \"filters\": [\n");
        long[][] configs = {{1000, 10}, {200, 1_000_000}, {64, 2}, {3, 33}, {5000, 1000}};
        for (int c = 0; c < configs.length; c++) {
            long n = configs[c][0];
            double p = 1.0 / configs[c][1];
            BloomFilter<CharSequence> filter = BloomFilter.create(Funnels.stringFunnel(StandardCharsets.UTF_8), n, p);
            List<String> added = items((int) n);
            for (String s : added) filter.put(s);
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            filter.writeTo(out);
            DataInputStream in = new DataInputStream(new ByteArrayInputStream(out.toByteArray()));
            int strategy = in.readByte();
            int hashes = in.readByte() & 0xff;
            int words = in.readInt();
            StringBuilder setBits = new StringBuilder();
            for (int w = 0; w < words; w++) {
                long word = in.readLong();
                for (int b = 0; b < 64; b++) {
                    if ((word >>> b & 1) != 0) {
                        if (setBits.length() > 0) setBits.append(',');
                        setBits.append((long) w * 64 + b);
                    }
                }
            }
            // Probes that were never added, with Guava's answers (false positives included).
            StringBuilder probes = new StringBuilder();
            for (int i = 0; i < 200; i++) {
                String probe = "absent-" + i;
                if (i > 0) probes.append(',');
                probes.append(filter.mightContain(probe) ? 1 : 0);
            }
            json.append(String.format(
                "    {\"capacity\": %d, \"error_rate\": %s, \"strategy\": %d, \"hashes\": %d, \"bits\": %d, "
                + "\"items\": %d, \"set_bits\": [%s], \"absent_probes_contained\": [%s]}%s\n",
                n, Double.toString(p), strategy, hashes, (long) words * 64, added.size(), setBits, probes,
                c + 1 < configs.length ? "," : ""));
        }
        json.append("  ]\n}\n");
        System.out.print(json);
    }
}
