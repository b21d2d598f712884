/* The floor of a module command, for bench/bench.py: what a Bloom command
 * costs on this server before it does any Bloom work. bench reports each
 * module's commands as ratios to these, measured back to back on one server.
 *
 * FLOOR.EXISTS key item            opens the key, looks at its type, replies 0
 * FLOOR.MEXISTS key item [item...] the same, replying one 0 per item
 * FLOOR.MADD key item [item...]    opens the key for writing, replies one 0
 *                                  per item and replicates the command, as
 *                                  every write that changed something must
 *
 * and for the sketches' batch rows, each parsing what the real command must
 * parse and replying as it replies:
 * FLOOR.INCRBY key item n [item n ...]  opens for writing, parses each n as
 *                                  an integer, one integer per pair, replicates
 *                                  (CMS.INCRBY's shape)
 * FLOOR.MADDNIL key item [item...] opens for writing, one nil per item,
 *                                  replicates (TOPK.ADD's shape)
 * FLOOR.ADDVALUES key v [v ...]    opens for writing, parses each v as a
 *                                  double, replies OK, replicates (TDIGEST.ADD)
 * FLOOR.MDOUBLES key v [v ...]     opens the key, parses each v as a double,
 *                                  one double per value (TDIGEST.CDF)
 *
 * The items' bytes are not read (a pointer fetch each), so a floor is a touch
 * lower than any real command's. */
#include "redismodule.h"

static int LookAtKey(RedisModuleCtx *ctx, RedisModuleString *name, int mode) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, mode);
    int type = RedisModule_KeyType(key);
    RedisModule_CloseKey(key);
    return type;
}

static int FloorExists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], REDISMODULE_READ);
    return RedisModule_ReplyWithLongLong(ctx, 0);
}

static int FloorMulti(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int mode) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], mode);
    RedisModule_ReplyWithArray(ctx, argc - 2);
    for (int i = 2; i < argc; i++) RedisModule_ReplyWithLongLong(ctx, 0);
    return REDISMODULE_OK;
}

static int FloorMexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return FloorMulti(ctx, argv, argc, REDISMODULE_READ);
}

static int FloorMadd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    int status = FloorMulti(ctx, argv, argc, REDISMODULE_READ | REDISMODULE_WRITE);
    if (argc >= 3) RedisModule_ReplicateVerbatim(ctx);
    return status;
}

static int FloorIncrby(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 4 || argc % 2) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    RedisModule_ReplyWithArray(ctx, (argc - 2) / 2);
    for (int i = 2; i < argc; i += 2) {
        long long n = 0;
        if (RedisModule_StringToLongLong(argv[i + 1], &n) != REDISMODULE_OK) n = -1;
        RedisModule_ReplyWithLongLong(ctx, n);
    }
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

static int FloorMaddNil(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    RedisModule_ReplyWithArray(ctx, argc - 2);
    for (int i = 2; i < argc; i++) RedisModule_ReplyWithNull(ctx);
    RedisModule_ReplicateVerbatim(ctx);
    return REDISMODULE_OK;
}

static int FloorAddValues(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], REDISMODULE_READ | REDISMODULE_WRITE);
    double sum = 0;
    for (int i = 2; i < argc; i++) {
        double v = 0;
        if (RedisModule_StringToDouble(argv[i], &v) != REDISMODULE_OK) return RedisModule_ReplyWithError(ctx, "ERR value");
        sum += v;
    }
    (void)sum;
    RedisModule_ReplicateVerbatim(ctx);
    return RedisModule_ReplyWithSimpleString(ctx, "OK");
}

static int FloorMdoubles(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], REDISMODULE_READ);
    RedisModule_ReplyWithArray(ctx, argc - 2);
    for (int i = 2; i < argc; i++) {
        double v = 0;
        if (RedisModule_StringToDouble(argv[i], &v) != REDISMODULE_OK) v = -1;
        RedisModule_ReplyWithDouble(ctx, v / 2);
    }
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.exists", FloorExists, "readonly fast", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.mexists", FloorMexists, "readonly fast", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.incrby", FloorIncrby, "write deny-oom", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.maddnil", FloorMaddNil, "write deny-oom", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.addvalues", FloorAddValues, "write deny-oom", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.mdoubles", FloorMdoubles, "readonly", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "floor.madd", FloorMadd, "write deny-oom", 1, 1, 1);
}
